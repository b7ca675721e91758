//! Encodes the machine's commands as Redis calls and decodes Redis's
//! answers into the machine's replies. Pure functions: no I/O, no lock
//! decisions. Every decoder turns any value it does not expect into a
//! typed failure, never a panic.
//!
//! [`encode`](mod@encode) builds the calls, [`waits`](mod@waits) the
//! `WAIT` and `WAITAOF` behind them, [`decode`](mod@decode) reads the
//! answers. Imports run one way: `encode` uses `waits` and `decode`,
//! `waits` uses `decode`.

mod decode;
mod encode;
mod waits;

pub(crate) use decode::{
    OpKind, SetNxGet, decode_del_if_eq, decode_script, decode_set_ifeq, decode_set_nx_get,
    failure_of, refuses_for_good, refuses_native,
};
pub(crate) use encode::{
    BatchOp, Encoded, Plan, encode, encode_batch, encode_own_refresh, unsupported,
};
pub(crate) use waits::Waits;
// What only the reply fuzzer reads.
#[cfg(test)]
pub(crate) use decode::{decode_op, failure_of_code};
#[cfg(test)]
pub(crate) use waits::{decode_wait, with_replicas};
