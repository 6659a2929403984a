//! Reduction element types: the C types reductions are defined for, complex ones included.

use gda_shmem::{Elem, Pe, ReduceOp, Reducible, Result, Team};

/// A C complex number (`float _Complex`, `double _Complex`): two `F`s, real first, as C lays
/// it out. Only sum and product are defined for it, as the specification says.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, PartialOrd)]
pub struct Complex<F>(pub F, pub F);

// SAFETY: `repr(C)` pair of the same float type: no padding, every bit pattern valid.
unsafe impl bytemuck::Zeroable for Complex<f32> {}
// SAFETY: as above.
unsafe impl bytemuck::Pod for Complex<f32> {}
// SAFETY: as above.
unsafe impl bytemuck::Zeroable for Complex<f64> {}
// SAFETY: as above.
unsafe impl bytemuck::Pod for Complex<f64> {}

macro_rules! complex {
    ($($f:ty),*) => {$(
        impl Elem for Complex<$f> {}
        impl Reducible for Complex<$f> {
            fn combine(op: ReduceOp, a: Self, b: Self) -> Option<Self> {
                match op {
                    ReduceOp::Sum => Some(Complex(a.0 + b.0, a.1 + b.1)),
                    ReduceOp::Prod => Some(Complex(a.0 * b.0 - a.1 * b.1, a.0 * b.1 + a.1 * b.0)),
                    _ => None,
                }
            }
        }
    )*};
}
complex!(f32, f64);

/// The element type of a reduction, as the C routine's name gives it.
#[derive(Clone, Copy, Debug)]
pub enum RedTy {
    /// `signed char`, `char` (signed on this ABI), `int8_t`.
    I8,
    /// `short`, `int16_t`.
    I16,
    /// `int`, `int32_t`.
    I32,
    /// `long`, `long long`, `int64_t`, `ptrdiff_t`.
    I64,
    /// `unsigned char`, `uint8_t`.
    U8,
    /// `unsigned short`, `uint16_t`.
    U16,
    /// `unsigned int`, `uint32_t`.
    U32,
    /// `unsigned long`, `unsigned long long`, `uint64_t`, `size_t`.
    U64,
    /// `float`.
    F32,
    /// `double`.
    F64,
    /// `float _Complex`.
    C32,
    /// `double _Complex`.
    C64,
}

/// Runs `$e` with `$T` bound to the Rust type of `$ty`.
macro_rules! with_type {
    ($ty:expr, $T:ident => $e:expr) => {
        match $ty {
            RedTy::I8 => {
                type $T = i8;
                $e
            }
            RedTy::I16 => {
                type $T = i16;
                $e
            }
            RedTy::I32 => {
                type $T = i32;
                $e
            }
            RedTy::I64 => {
                type $T = i64;
                $e
            }
            RedTy::U8 => {
                type $T = u8;
                $e
            }
            RedTy::U16 => {
                type $T = u16;
                $e
            }
            RedTy::U32 => {
                type $T = u32;
                $e
            }
            RedTy::U64 => {
                type $T = u64;
                $e
            }
            RedTy::F32 => {
                type $T = f32;
                $e
            }
            RedTy::F64 => {
                type $T = f64;
                $e
            }
            RedTy::C32 => {
                type $T = Complex<f32>;
                $e
            }
            RedTy::C64 => {
                type $T = Complex<f64>;
                $e
            }
        }
    };
}

/// The team reduction of `n` elements of `ty` (the Rust implementation, monomorphised).
pub(crate) fn team_reduce<P: gda_hal::Provider>(
    pe: &Pe<P>,
    t: &Team,
    dst: *mut u8,
    src: *const u8,
    n: usize,
    ty: RedTy,
    op: ReduceOp,
) -> Result<()> {
    with_type!(ty, T => {
        let d = pe.sym_at(dst.cast::<T>().cast_const(), n)?;
        let s = pe.sym_at(src.cast::<T>(), n)?;
        pe.reduce(t, d, s, n, op)
    })
}

/// `acc[i] = acc[i] op more[i]` with `ty`'s arithmetic (the active-set reductions combine
/// gathered bytes).
pub(crate) fn combine_bytes(ty: RedTy, op: ReduceOp, acc: &mut [u8], more: &[u8]) {
    with_type!(ty, T => {
        let w = size_of::<T>();
        for (a, b) in acc.chunks_exact_mut(w).zip(more.chunks_exact(w)) {
            let x: T = bytemuck::pod_read_unaligned(a);
            let y: T = bytemuck::pod_read_unaligned(b);
            let r = T::combine(op, x, y).unwrap_or(x);
            a.copy_from_slice(bytemuck::bytes_of(&r));
        }
    })
}

/// Bytes of one element of `ty`.
pub(crate) fn width(ty: RedTy) -> usize {
    with_type!(ty, T => size_of::<T>())
}
