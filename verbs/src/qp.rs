//! RC queue pairs.

use crate::abi::VerbsContext;

/// The QPs of one context, by number (completions name a QP by number).
#[derive(Default)]
pub struct ContextQps {}

/// Installs the QP operations of a new context.
pub fn install(_v: &mut VerbsContext) {}
