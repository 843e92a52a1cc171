//! Fault injection for the crash tests (`tests/it/idempotency_faults.rs`), compiled only with
//! the test-only feature `fault-hooks`, which vow-server's own tests turn on (its dev-dependency
//! on itself) and no release build has.

/// `VOW_TEST_HANG_AFTER_COMMIT=1`: a keyed request whose write committed never answers, so a
/// test can `kill -9` the process between the commit and the response. Read once.
pub(super) fn hang_after_commit() -> bool {
    static HANG: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *HANG.get_or_init(|| std::env::var_os("VOW_TEST_HANG_AFTER_COMMIT").is_some_and(|v| v == "1"))
}
