//! Reduction element types: the C types reductions are defined for, complex ones included.

pub(crate) use gda_shmem::erased::RedTy;
