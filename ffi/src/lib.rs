//! A C ABI for leakgate: exact, lock-free GCRA limiters, keyed limiters and the RFC 2697/2698
//! colour meters, for programs in C (or anything that calls C).
//!
//! Build `libleakgate_ffi.a` and `libleakgate_ffi.so` with `cargo build -p leakgate-ffi
//! --release`, include `ffi/include/leakgate.h` (generated from this crate by cbindgen; a test
//! checks it is current), and link `libleakgate_ffi.a -lpthread -ldl -lm -lrt` (or
//! `-lleakgate_ffi` for the shared library). See the crate's `README.md` for a C example, the
//! link flags and the figures.
//!
//! * **Handles.** Opaque pointers made by a `*_new` function (from an [`LgQuota`], itself from
//!   text or numbers), freed by the matching `*_free`: [`LgLimiter`] (one bucket), [`LgKeyed`]
//!   (one bucket per `uint64_t` key), [`LgKeyedBytes`] (per byte-string key), [`LgSrTcm`] and
//!   [`LgTrTcm`] (colour meters), [`LgKeyedSrTcm`] and [`LgKeyedTrTcm`] (one meter per flow).
//! * **Answers.** Checks return [`LG_OK`] (admitted) or [`LG_DENIED`] and fill an optional
//!   [`LgReport`]; meters return an [`LgColor`] (`uint8_t`, DPDK's values: green 0, yellow 1,
//!   red 2).
//! * **Errors are codes, never crashes.** A NULL pointer, a bad quota or another bad argument
//!   returns a negative `LG_ERR_*` status (or [`LG_COLOR_ERROR`] from a meter) and changes
//!   nothing. Every function runs its body under `catch_unwind`: no panic crosses into C.
//! * **Threads.** Every handle may be used from any number of threads at once, as the Rust types
//!   may (they are `Send + Sync`, and lock-free but for a keyed table's insert of a new key).
//! * **Shared or exclusive meters.** A meter's plain functions are lock-free and may be called
//!   from any number of threads at once; its `_excl` functions ([`lg_srtcm_color_blind_at_excl`]
//!   and the rest) give the same colours with plain reads and writes, for a meter that one
//!   thread owns ([pointer rule](#pointers) 5).
//! * **Caller time.** The `*_at` functions take the time instead of reading the clock: read
//!   [`lg_now_ns`] once per burst of packets and pass it to every check of the burst.
//!
//! # Pointers
//!
//! The rules every function's `# Safety` section refers to (C has no borrow checker, so they are
//! the caller's to keep; the functions check what can be checked: NULL and alignment):
//!
//! 1. A handle passed to a function is NULL or was returned by the matching `*_new` and not yet
//!    freed. It is freed once, by its `*_free`, after every other call on it in every thread has
//!    returned; calls on it may run in any number of threads at once until then (but see 5).
//! 2. An input pointer (a quota, a key, text) points to readable memory of its size (or of its
//!    given length) that no one writes during the call; NULL only where the function says so
//!    (a byte key or text of length 0 may be NULL).
//! 3. An output pointer (`out`, `report`, a message buffer) points to writable memory of its size
//!    that no one else reads or writes during the call; NULL where the function allows it
//!    (`report`, `tc`/`te`, `err`).
//! 4. Text is `len` bytes, or, with `len` = [`LG_NUL_TERMINATED`] (`SIZE_MAX`), a NUL-terminated
//!    string.
//! 5. A meter passed to an `_excl` function ([`lg_srtcm_color_blind_at_excl`] and the rest) is
//!    used by no other call, in any thread, while that call runs: the caller holds it
//!    exclusively (one meter per core or queue, as with DPDK's `rte_meter`). The plain
//!    functions are for a meter shared by threads; a meter may be used by both, at different
//!    times.
//!
//! All `unsafe` code (pointer dereferences, `Box::from_raw`) is in one private module,
//! `raw.rs`, each block with the argument for it; the rest of the crate is safe Rust over the
//! references that module hands out.
//!
//! # From Rust
//!
//! The functions are `unsafe extern "C" fn`s, callable from Rust too (the tests and the
//! benchmark do):
//!
//! ```
//! use leakgate_ffi::*;
//! use std::ptr::null_mut;
//! let (mut q, mut lim) = (LgQuota::default(), null_mut());
//! unsafe {
//!     assert_eq!(lg_quota_parse(c"100/s burst 20".as_ptr(), LG_NUL_TERMINATED, &mut q, null_mut(), 0), LG_OK);
//!     assert_eq!(lg_limiter_new(&q, &mut lim), LG_OK);
//!     let mut report = LgReport::default();
//!     assert_eq!(lg_limiter_check_n(lim, 5, &mut report), LG_OK);
//!     assert_eq!(report.remaining, 15);
//!     lg_limiter_free(lim);
//! }
//! ```
#![deny(missing_docs)]
// Library code: one unsafe operation a block, each with its argument. (The tests call the
// `unsafe extern "C"` functions in plain `unsafe` blocks, as C would.)
#![cfg_attr(
    not(test),
    warn(clippy::undocumented_unsafe_blocks, clippy::multiple_unsafe_ops_per_block)
)]

mod batch;
mod clock;
mod color;
mod exclusive;
mod keyed;
mod keyed_bytes;
mod keyed_srtcm;
mod keyed_trtcm;
mod leased_local;
mod leased_meters;
mod limiter;
mod quota;
mod raw;
mod report;
mod srtcm;
mod status;
mod trtcm;

pub use batch::{
    lg_keyed_bytes_check_batch, lg_keyed_bytes_check_batch_at, lg_keyed_check_batch,
    lg_keyed_check_batch_at,
};
pub use clock::lg_now_ns;
pub use color::{LgColor, LG_COLOR_ERROR, LG_GREEN, LG_RED, LG_YELLOW};
pub use exclusive::{
    lg_srtcm_color_aware_at_excl, lg_srtcm_color_aware_excl, lg_srtcm_color_blind_at_excl,
    lg_srtcm_color_blind_excl, lg_trtcm_color_aware_at_excl, lg_trtcm_color_aware_excl,
    lg_trtcm_color_blind_at_excl, lg_trtcm_color_blind_excl,
};
pub use keyed::{
    lg_keyed_check, lg_keyed_check_at, lg_keyed_check_n, lg_keyed_check_n_at, lg_keyed_free,
    lg_keyed_new, LgKeyed,
};
pub use keyed_bytes::{
    lg_keyed_bytes_check, lg_keyed_bytes_check_at, lg_keyed_bytes_check_n,
    lg_keyed_bytes_check_n_at, lg_keyed_bytes_free, lg_keyed_bytes_new, LgKeyedBytes,
};
pub use keyed_srtcm::{
    lg_keyed_srtcm_color_aware, lg_keyed_srtcm_color_aware_at, lg_keyed_srtcm_color_blind,
    lg_keyed_srtcm_color_blind_at, lg_keyed_srtcm_free, lg_keyed_srtcm_new, LgKeyedSrTcm,
};
pub use keyed_trtcm::{
    lg_keyed_trtcm_color_aware, lg_keyed_trtcm_color_aware_at, lg_keyed_trtcm_color_blind,
    lg_keyed_trtcm_color_blind_at, lg_keyed_trtcm_free, lg_keyed_trtcm_new, LgKeyedTrTcm,
};
pub use leased_local::{
    lg_leased_srtcm_local_color_blind_at, lg_leased_srtcm_local_free, lg_leased_srtcm_local_new,
    lg_leased_trtcm_local_color_blind_at, lg_leased_trtcm_local_free, lg_leased_trtcm_local_new,
    LgLeasedSrTcmLocal, LgLeasedTrTcmLocal,
};
pub use leased_meters::{
    lg_leased_srtcm_color_aware_at, lg_leased_srtcm_color_blind, lg_leased_srtcm_color_blind_at,
    lg_leased_srtcm_color_blind_at_slot, lg_leased_srtcm_excess_bound, lg_leased_srtcm_free,
    lg_leased_srtcm_new, lg_leased_trtcm_color_aware_at, lg_leased_trtcm_color_blind,
    lg_leased_trtcm_color_blind_at, lg_leased_trtcm_color_blind_at_slot,
    lg_leased_trtcm_excess_bound, lg_leased_trtcm_free, lg_leased_trtcm_new, LgLeasedSrTcm,
    LgLeasedTrTcm,
};
pub use limiter::{
    lg_limiter_check, lg_limiter_check_at, lg_limiter_check_n, lg_limiter_check_n_at,
    lg_limiter_free, lg_limiter_new, LgLimiter,
};
pub use quota::{lg_quota_bytes, lg_quota_new, lg_quota_parse, LgQuota};
pub use raw::LG_NUL_TERMINATED;
pub use report::{LgReport, LG_NEVER};
pub use srtcm::{
    lg_srtcm_color_aware, lg_srtcm_color_aware_at, lg_srtcm_color_blind, lg_srtcm_color_blind_at,
    lg_srtcm_free, lg_srtcm_new, lg_srtcm_tokens_at, LgSrTcm,
};
pub use status::{
    lg_status_str, LgStatus, LG_DENIED, LG_ERR_ARGUMENT, LG_ERR_NULL, LG_ERR_PANIC, LG_ERR_QUOTA,
    LG_OK,
};
pub use trtcm::{
    lg_trtcm_color_aware, lg_trtcm_color_aware_at, lg_trtcm_color_blind, lg_trtcm_color_blind_at,
    lg_trtcm_free, lg_trtcm_new, lg_trtcm_tokens_at, LgTrTcm,
};

/// Every handle may be shared among threads, as the promise to C says.
const _: () = {
    const fn shared<T: Send + Sync>() {}
    shared::<LgLimiter>();
    shared::<LgKeyed>();
    shared::<LgKeyedBytes>();
    shared::<LgSrTcm>();
    shared::<LgTrTcm>();
    shared::<LgKeyedSrTcm>();
    shared::<LgKeyedTrTcm>();
};
