// The posting protocol (gda/sq.hpp, with gda/mlx5_sq.hpp) under ThreadSanitizer: host threads standing in for GPU
// lanes post inline RDMA WRITEs through one queue while a small device stand-in (below) reads
// the doorbell record, executes the WQEs in order and writes mlx5 CQEs, as a ConnectX does. Every
// value must land, and TSan must report no race. Built and run by device/check.sh (--tsan).
//
// The stand-in accesses the rings as a device would: acquire loads of the doorbell record,
// plain reads of WQE bytes the record published, release stores of the CQE's owner byte.
#include <gda/mlx5_sq.hpp>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <thread>
#include <vector>

namespace {

constexpr uint32_t RING = 64;    // WQEBBs
constexpr uint32_t CQ = 256;     // CQEs
constexpr uint32_t THREADS = 4;
constexpr uint32_t PER = 1000;

alignas(64) uint64_t ring[RING * 8];
alignas(64) uint8_t cq[CQ * 64];
alignas(64) uint32_t sq_dbrec[2];
alignas(64) uint32_t cq_dbrec[2];
alignas(64) uint64_t doorbell;
uint64_t memory[THREADS * PER];
std::atomic<bool> stop{false};

uint32_t be32(const uint8_t* p) {
    return uint32_t(p[0]) << 24 | uint32_t(p[1]) << 16 | uint32_t(p[2]) << 8 | p[3];
}

// Executes WQEs up to the doorbell record's producer index; writes a CQE for signalled ones.
void device() {
    uint32_t consumed = 0;  // WQEBBs, 16-bit view compared below
    uint32_t ci = 0;
    for (;;) {
        const uint32_t rec = gda::be::u32(__atomic_load_n(&sq_dbrec[1], __ATOMIC_ACQUIRE));
        if ((consumed & 0xffff) == rec) {
            if (stop.load(std::memory_order_acquire)) return;
            std::this_thread::yield();
            continue;
        }
        const uint8_t* w = reinterpret_cast<const uint8_t*>(ring) + (consumed % RING) * 64;
        const uint32_t w0 = be32(w), w1 = be32(w + 4);
        const uint8_t opcode = uint8_t(w0), fm = w[11];
        const uint32_t ds = w1 & 0x3f;
        const uint16_t index = uint16_t(w0 >> 8);
        if (opcode == 0x08) {  // RDMA WRITE with an inline segment (unit 2)
            uint64_t raddr = 0;
            for (int i = 0; i < 8; ++i) raddr = raddr << 8 | w[16 + i];
            const uint8_t* inl = w + 32;
            const uint32_t len = be32(inl) & 0x7fffffff;
            std::memcpy(reinterpret_cast<void*>(raddr), inl + 4, len);
        }
        if (fm & 0x08) {
            // Read the consumer index the host last reported (its release store).
            while (ci - gda::be::u32(__atomic_load_n(&cq_dbrec[0], __ATOMIC_ACQUIRE)) >= CQ) {
                std::this_thread::yield();
            }
            uint8_t* c = cq + (ci % CQ) * 64;
            // The CQE's last word at once (wqe_counter, signature, op_own), as the device
            // writes a CQE: release pairs with the host's acquire load of that word.
            const uint8_t owner = uint8_t((ci / CQ) & 1);
            const uint8_t tail[4] = {uint8_t(index >> 8), uint8_t(index), 0, uint8_t(0x00 | owner)};
            uint32_t word;
            std::memcpy(&word, tail, 4);
            __atomic_store_n(reinterpret_cast<uint32_t*>(c + 60), word, __ATOMIC_RELEASE);
            ++ci;
        }
        consumed += (ds + 3) / 4;
    }
}

}  // namespace

int main() {
    for (uint32_t i = 0; i < CQ; ++i) cq[i * 64 + 63] = 0xf1;  // invalid, owner 1: not yet written
    gda::SqState state{};
    gda::mlx5::Queue q{};
    q.sq.wq.buf = reinterpret_cast<uint64_t>(ring);
    q.sq.wq.dbrec = reinterpret_cast<uint64_t>(sq_dbrec);
    q.sq.wq.db = reinterpret_cast<uint64_t>(&doorbell);
    q.sq.wq.entries = RING;
    q.sq.wq.qpn = 0x99;
    q.sq.wq.max_inline = 64;
    q.proto.cq.buf = reinterpret_cast<uint64_t>(cq);
    q.proto.cq.dbrec = reinterpret_cast<uint64_t>(cq_dbrec);
    q.proto.cq.entries = CQ;
    q.proto.cq.cqe_bytes = 64;
    q.proto.state = reinterpret_cast<uint64_t>(&state);
    // What gda_hal::SendQueue computes for a 64-WQEBB mlx5 ring: 16-bit counters, WQEs of at
    // most 16 WQEBBs, a CQE at least every 16.
    q.proto.capacity = RING;
    q.proto.max_units = 16;
    q.proto.signal_every = 16;
    q.proto.bits = 16;
    q.proto.provider = uint32_t(gda::ProviderTag::Mlx5);
    q.proto.timeout_ns = 60'000'000'000ull;
    std::thread dev(device);
    std::vector<std::thread> ts;
    std::atomic<int> bad{0};
    for (uint32_t t = 0; t < THREADS; ++t) {
        ts.emplace_back([&, t] {
            for (uint32_t i = 0; i < PER; ++i) {
                const uint64_t v = uint64_t(t) << 32 | i;
                const gda::Remote r{reinterpret_cast<uint64_t>(&memory[t * PER + i]), 1};
                if (gda::sq::write_inline(q, r, &v, 8, 0) != gda::SqStatus::Ok) ++bad;
            }
            if (gda::sq::quiet(q) != gda::SqStatus::Ok) ++bad;
        });
    }
    for (auto& t : ts) t.join();
    stop.store(true, std::memory_order_release);
    dev.join();
    uint32_t checked = 0;
    for (uint32_t t = 0; t < THREADS; ++t) {
        for (uint32_t i = 0; i < PER; ++i) {
            if (memory[t * PER + i] != (uint64_t(t) << 32 | i)) ++bad;
            ++checked;
        }
    }
    std::printf("protocol_tsan: %u values checked, %d bad\n", checked, bad.load());
    return bad.load() == 0 && checked == THREADS * PER ? 0 : 1;
}
