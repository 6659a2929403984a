// A put-with-signal ring: on every PE one block forwards a 4 KiB message around the ring of PEs
// ROUNDS times. PE 0 starts; each PE waits for the signal of round r from its left neighbour,
// checks the message, and sends it on with the signal set to r + 1 — data and signal in one
// call (putmem_signal), the signal delivered after the data.
//
// Builds unchanged with hipcc (put_signal_ring.hip), nvcc (put_signal_ring.cu) and as host C++
// (gdacc, CPU threads): gdarun -n 4 ./put_signal_ring
#include "gda_example.hpp"

constexpr uint32_t WORDS = 512;  // 4 KiB
constexpr uint32_t ROUNDS = 20;

GDA_KERNEL void ring(const gda::shmem::Ctx* ctx, uint64_t* msg, uint64_t* sig, int32_t* bad) {
    using namespace gda::shmem;
    const Ctx& c = *ctx;
    const gda::Block block = gda::this_block();
    const int me = my_pe(c), n = n_pes(c), right = (me + 1) % n;
    for (uint32_t r = 0; r < ROUNDS; ++r) {
        // PE 0 starts each round; the others wait for it to arrive from the left.
        const uint64_t want = uint64_t(r) * n + (me == 0 ? 0 : me);
        if (me != 0 || r > 0) {
            uint64_t seen = 0;
            if (block.rank() == 0 && signal_wait_until(c, sig, Cmp::Ge, want, &seen) != Status::Ok) {
                *bad = 1;
            }
            block.sync();
            // The message of this hop: word i is i + the hop number.
            for (uint32_t i = block.rank(); i < WORDS; i += block.size()) {
                if (msg[i] != i + want) *bad = 1;
            }
            block.sync();
        } else {
            for (uint32_t i = block.rank(); i < WORDS; i += block.size()) msg[i] = i;
            block.sync();
        }
        // Forward with the next hop's number in the data and in the signal.
        const uint64_t next = want + 1;
        for (uint32_t i = block.rank(); i < WORDS; i += block.size()) msg[WORDS + i] = i + next;
        block.sync();
        if (me == n - 1 && r + 1 == ROUNDS) break;  // the last hop of the last round
        if (putmem_signal(c, msg, msg + WORDS, WORDS * 8, sig, next, SignalOp::Set, right, block) !=
            Status::Ok) {
            *bad = 1;
        }
    }
    if (quiet(c, block) != Status::Ok) *bad = 1;
}

int main() {
    shmem_init();
    const gda::shmem::Ctx* ctx = example::context();
    std::printf("put_signal_ring: PE %d: context in %s\n", shmem_my_pe(), example::memory_name(ctx));
    auto* msg = static_cast<uint64_t*>(shmem_calloc(2 * WORDS, 8));
    auto* sig = static_cast<uint64_t*>(shmem_calloc(1, 8));
    int32_t* bad = static_cast<int32_t*>(shmem_calloc(1, 4));
    if (!msg || !sig || !bad) example::die("shmem_calloc failed");
    shmem_barrier_all();
    GDA_LAUNCH(ring, 1, 64, ctx, msg, sig, bad);
    example::wait();
    shmem_barrier_all();
    const int me = shmem_my_pe();
    if (*bad) {
        std::fprintf(stderr, "put_signal_ring: PE %d saw a wrong message or signal\n", me);
        return 1;
    }
    std::printf("put_signal_ring: PE %d: %u rounds ok\n", me, ROUNDS);
    shmem_free(msg);
    shmem_free(sig);
    shmem_free(bad);
    shmem_finalize();
    return 0;
}
