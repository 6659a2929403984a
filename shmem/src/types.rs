//! Element types: what symmetric memory holds, what atomics and reductions take.

/// A type symmetric memory can hold and puts/gets can move (plain bytes, any bit pattern).
pub trait Elem: bytemuck::Pod + Send + Sync + PartialEq + std::fmt::Debug + 'static {}

macro_rules! elems { ($($t:ty),*) => { $(impl Elem for $t {})* } }
elems!(u8, i8, u16, i16, u32, i32, u64, i64, f32, f64, usize, isize);
/// A 16-byte element moved as bytes (C's `long double`, `double _Complex`).
impl Elem for [u8; 16] {}

/// Operand width of an atomic, explicit (DESIGN §7.4: never read 8 bytes of a 4-byte operand).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Width {
    /// 32 bits.
    W32,
    /// 64 bits.
    W64,
}

impl Width {
    /// Bytes.
    #[must_use]
    pub const fn bytes(self) -> u32 {
        match self {
            Self::W32 => 4,
            Self::W64 => 8,
        }
    }
}

/// Integer types atomics operate on (32 and 64 bits, signed or not).
pub trait AtomicInt: Elem + Copy {
    /// Operand width.
    const WIDTH: Width;
    /// The value's bits, zero-extended.
    fn to_bits(self) -> u64;
    /// The value from the low `WIDTH` bits.
    fn from_bits(b: u64) -> Self;
}

macro_rules! atomic_ints {
    ($($t:ty => $w:ident, $u:ty);*) => {$(
        impl AtomicInt for $t {
            const WIDTH: Width = Width::$w;
            fn to_bits(self) -> u64 { u64::from(self as $u) }
            fn from_bits(b: u64) -> Self { b as $u as $t }
        }
    )*};
}
atomic_ints!(u32 => W32, u32; i32 => W32, u32; u64 => W64, u64; i64 => W64, u64);

/// A 16-bit point-to-point synchronisation variable (C's `short` and `unsigned short`, whose
/// `wait_until`, `test` and `wait` forms OpenSHMEM 1.5 still supports, deprecated): only
/// waited on and tested on this PE, never an atomic operand.
pub trait ShortInt: Elem + Copy + PartialOrd {
    /// The value from its 16 bits.
    fn from_u16(b: u16) -> Self;
}

impl ShortInt for i16 {
    fn from_u16(b: u16) -> Self {
        b as i16
    }
}

impl ShortInt for u16 {
    fn from_u16(b: u16) -> Self {
        b
    }
}

/// Comparison for `wait_until` and `test` (OpenSHMEM's `SHMEM_CMP_*`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cmp {
    /// `==`
    Eq,
    /// `!=`
    Ne,
    /// `>`
    Gt,
    /// `>=`
    Ge,
    /// `<`
    Lt,
    /// `<=`
    Le,
}

impl Cmp {
    /// Whether `a <cmp> b`.
    pub fn holds<T: PartialOrd>(self, a: T, b: T) -> bool {
        match self {
            Self::Eq => a == b,
            Self::Ne => a != b,
            Self::Gt => a > b,
            Self::Ge => a >= b,
            Self::Lt => a < b,
            Self::Le => a <= b,
        }
    }
}

/// How put-with-signal updates the signal word.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SignalOp {
    /// Store the value.
    Set,
    /// Add the value.
    Add,
}

/// Reduction operators.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReduceOp {
    /// Sum.
    Sum,
    /// Product.
    Prod,
    /// Minimum.
    Min,
    /// Maximum.
    Max,
    /// Bitwise and (integers only).
    And,
    /// Bitwise or (integers only).
    Or,
    /// Bitwise xor (integers only).
    Xor,
}

/// Types reductions are defined for; bitwise operators return `None` for floats.
pub trait Reducible: Elem + Copy + PartialOrd {
    /// `a op b`, or `None` when the operator is not defined for the type.
    fn combine(op: ReduceOp, a: Self, b: Self) -> Option<Self>;
}

macro_rules! reducible_int {
    ($($t:ty),*) => {$(
        impl Reducible for $t {
            fn combine(op: ReduceOp, a: Self, b: Self) -> Option<Self> {
                Some(match op {
                    ReduceOp::Sum => a.wrapping_add(b),
                    ReduceOp::Prod => a.wrapping_mul(b),
                    ReduceOp::Min => a.min(b),
                    ReduceOp::Max => a.max(b),
                    ReduceOp::And => a & b,
                    ReduceOp::Or => a | b,
                    ReduceOp::Xor => a ^ b,
                })
            }
        }
    )*};
}
reducible_int!(u8, i8, u16, i16, u32, i32, u64, i64, usize, isize);

macro_rules! reducible_float {
    ($($t:ty),*) => {$(
        impl Reducible for $t {
            fn combine(op: ReduceOp, a: Self, b: Self) -> Option<Self> {
                match op {
                    ReduceOp::Sum => Some(a + b),
                    ReduceOp::Prod => Some(a * b),
                    ReduceOp::Min => Some(a.min(b)),
                    ReduceOp::Max => Some(a.max(b)),
                    ReduceOp::And | ReduceOp::Or | ReduceOp::Xor => None,
                }
            }
        }
    )*};
}
reducible_float!(f32, f64);

/// The largest alignment a symmetric allocation may ask for (1 GiB): the symmetric heap starts
/// at an address aligned to it (`Segment::create_aligned`), so offsets aligned to at most this
/// are addresses so aligned on every PE.
pub const MAX_ALIGN: usize = 1 << 30;
