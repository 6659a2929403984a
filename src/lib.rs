//! gda
