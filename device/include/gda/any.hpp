// gda device API: one kernel binary for every NIC compiled in. A queue handle carries its
// provider's tag; each call switches once over the providers this build includes, and calls
// that provider's (inlined) encoder. A build can leave providers out (define
// GDA_NO_MLX5 / GDA_NO_NATIVE / GDA_NO_BNXT); a queue of a provider left out, or of an unknown
// tag or ABI version, is refused with SqStatus-like codes, never posted.
#pragma once

#include "abi.hpp"
#include "sq.hpp"
#if !defined(GDA_NO_MLX5)
#include "mlx5.hpp"
#endif
#if !defined(GDA_NO_NATIVE)
#include "native.hpp"
#endif
#if !defined(GDA_NO_BNXT)
#include "bnxt.hpp"
#endif

namespace gda {

// A send queue of any provider. `abi` must be ABI_VERSION.
struct AnySq {
    uint32_t tag;  // ProviderTag
    uint32_t abi;
    union {
        WqHandle native;
        mlx5::Sq mlx5;
#if !defined(GDA_NO_BNXT)
        bnxt::Sq bnxt;  // `pos` carries its message number and PSN too
#else
        uint64_t bnxt_bytes[9];  // the same layout in a build without bnxt
#endif
    } q;
};
static_assert(sizeof(AnySq) == 80 && offsetof(AnySq, q) == 8, "AnySq layout");

// What a dispatched post did.
enum class PostStatus : int32_t {
    Ok = 0,
    NotCompiledIn = 1,  // the provider is not part of this build
    BadHandle = 2,      // unknown tag or another ABI version
};

// An 8-byte (or 4-byte) register value written inline to `remote` at `pos`, and rung.
template <class T>
GDA_FN PostStatus write_value_and_ring(const AnySq& s, SqPos pos, Remote remote, T value,
                                       uint32_t flags, Posted* out) {
    if (s.abi != ABI_VERSION) return PostStatus::BadHandle;
    switch (ProviderTag(s.tag)) {
        case ProviderTag::Mlx5:
#if !defined(GDA_NO_MLX5)
            *out = mlx5::post_write_value(s.q.mlx5, pos, remote, value, flags);
            mlx5::ring_sq(s.q.mlx5, *out);
            return PostStatus::Ok;
#else
            return PostStatus::NotCompiledIn;
#endif
        case ProviderTag::Native:
#if !defined(GDA_NO_NATIVE)
            *out = native::post_write_inline(s.q.native, pos, remote, &value, sizeof(T), flags);
            native::ring_sq(s.q.native, *out);
            return PostStatus::Ok;
#else
            return PostStatus::NotCompiledIn;
#endif
        case ProviderTag::Bnxt:
#if !defined(GDA_NO_BNXT)
            *out = bnxt::post_write_value(s.q.bnxt, pos, remote, value, flags);
            bnxt::ring_sq(s.q.bnxt, *out);
            return PostStatus::Ok;
#else
            return PostStatus::NotCompiledIn;
#endif
    }
    return PostStatus::BadHandle;
}

}  // namespace gda
