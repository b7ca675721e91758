//! Fuzzing every reader of a server's answer: arbitrary redis-rs values
//! (nested, malformed, every variant, error replies parsed from RESP,
//! integers at the edges, bulk strings that are not UTF-8) and arbitrary
//! redis-rs errors go into the lock's reply decoders (`wire`), the admin
//! reply readers (`reply`, `cluster`, `sentinel`) and the connection
//! greeting (`Dialect`). None may panic; each answers a typed failure, or a
//! valid reply that only a well-formed input can give: the decoders are
//! checked against a specification written here, apart from them.
//!
//! Also: the layout the lock script receives (`KEYS`, then `ARGV`), walked
//! the way `lock.lua` walks it, gives back exactly the operations encoded.
//!
//! The strategies are shared with other modules' fuzz tests (`check`).

use proptest::test_runner::Config;

mod admin;
mod layout;
mod replies;
pub(crate) mod strategies;

/// Cases per property: enough to reach the nested and the near-valid
/// shapes many times over, while the whole module runs in a few seconds.
const CASES: u32 = 10_000;

fn config(cases: u32) -> Config {
    Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    }
}
