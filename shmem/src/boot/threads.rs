//! PEs as threads of one process.

use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use super::Bootstrap;
use crate::error::{Result, ShmemError};

struct Round {
    generation: u64,
    slots: Vec<Option<Vec<u8>>>,
    last: Arc<Vec<Vec<u8>>>,
    /// A PE gave up (timed out or dropped mid-job): everyone else fails fast.
    broken: Option<String>,
}

/// What the threads of one job share.
pub struct Hub {
    job: String,
    names: gda_os::shm::JobNames,
    size: u32,
    timeout: Duration,
    round: Mutex<Round>,
    cv: Condvar,
}

impl Hub {
    /// A hub for `size` thread PEs; `timeout` bounds every collective wait.
    pub fn new(size: u32, timeout: Duration) -> Arc<Self> {
        let job = format!("t{}x{:08x}", std::process::id(), rand::random::<u32>());
        // The job id is made of characters JobNames accepts, so this cannot fail.
        let names = gda_os::shm::JobNames::new(&job, rand::random())
            .unwrap_or_else(|e| unreachable!("thread job id {job}: {e}"));
        Arc::new(Self {
            job,
            names,
            size,
            timeout,
            round: Mutex::new(Round {
                generation: 0,
                slots: vec![None; size as usize],
                last: Arc::new(Vec::new()),
                broken: None,
            }),
            cv: Condvar::new(),
        })
    }

    /// The bootstrap of thread PE `rank`.
    pub fn member(self: &Arc<Self>, rank: u32) -> ThreadBoot {
        ThreadBoot {
            hub: self.clone(),
            rank,
        }
    }

    /// The job id.
    pub fn job(&self) -> &str {
        &self.job
    }
}

/// One thread PE's bootstrap.
pub struct ThreadBoot {
    hub: Arc<Hub>,
    rank: u32,
}

impl Bootstrap for ThreadBoot {
    fn rank(&self) -> u32 {
        self.rank
    }

    fn size(&self) -> u32 {
        self.hub.size
    }

    fn job(&self) -> &str {
        &self.hub.job
    }

    fn names(&self) -> &gda_os::shm::JobNames {
        &self.hub.names
    }

    fn abort(&self, why: &str) {
        let mut r = self.hub.round.lock().unwrap_or_else(|e| e.into_inner());
        r.broken
            .get_or_insert_with(|| format!("PE {} failed: {why}", self.rank));
        self.hub.cv.notify_all();
    }

    fn broken(&self) -> Option<String> {
        self.hub
            .round
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .broken
            .clone()
    }

    fn allgather(&mut self, mine: &[u8]) -> Result<Vec<Vec<u8>>> {
        let hub = &*self.hub;
        let mut r = hub.round.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(b) = &r.broken {
            return Err(ShmemError::Boot(b.clone()));
        }
        let generation = r.generation;
        r.slots[self.rank as usize] = Some(mine.to_vec());
        if r.slots.iter().all(Option::is_some) {
            let all: Vec<Vec<u8>> = r
                .slots
                .iter_mut()
                .map(|s| s.take().unwrap_or_default())
                .collect();
            r.last = Arc::new(all);
            r.generation += 1;
            hub.cv.notify_all();
            return Ok(r.last.to_vec());
        }
        let deadline = Instant::now() + hub.timeout;
        loop {
            let now = Instant::now();
            if now >= deadline {
                let missing: Vec<u32> = (0..hub.size)
                    .filter(|&i| r.slots[i as usize].is_none())
                    .collect();
                r.broken = Some(format!(
                    "thread PE {} timed out in a bootstrap collective",
                    self.rank
                ));
                hub.cv.notify_all();
                return Err(ShmemError::Timeout {
                    what: "a bootstrap collective".into(),
                    after: hub.timeout,
                    missing,
                });
            }
            r = hub
                .cv
                .wait_timeout(r, deadline - now)
                .unwrap_or_else(|e| e.into_inner())
                .0;
            if r.generation != generation {
                return Ok(r.last.to_vec());
            }
            if let Some(b) = &r.broken {
                return Err(ShmemError::Boot(b.clone()));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allgather_rounds_and_timeout_names_missing() {
        let hub = Hub::new(3, Duration::from_secs(5));
        let hs: Vec<_> = (0..3)
            .map(|r| {
                let mut b = hub.member(r);
                std::thread::spawn(move || {
                    let mut out = Vec::new();
                    for round in 0..50u8 {
                        let all = b.allgather(&[r as u8, round]).unwrap();
                        out.push(all);
                    }
                    out
                })
            })
            .collect();
        for h in hs {
            for (round, all) in h.join().unwrap().into_iter().enumerate() {
                assert_eq!(
                    all,
                    vec![
                        vec![0, round as u8],
                        vec![1, round as u8],
                        vec![2, round as u8]
                    ]
                );
            }
        }
        let hub = Hub::new(3, Duration::from_millis(100));
        let mut b = hub.member(1);
        match b.allgather(b"x") {
            Err(ShmemError::Timeout { missing, .. }) => assert_eq!(missing, vec![0, 2]),
            other => panic!("{other:?}"),
        }
        // The others now fail fast instead of waiting out their own timeout.
        assert!(matches!(
            hub.member(0).allgather(b"y"),
            Err(ShmemError::Boot(_))
        ));
    }
}
