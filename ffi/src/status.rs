//! What every function returns: a status code (a check's answer, or why the call failed), and
//! the guard that keeps panics on this side of the boundary.

use std::ffi::c_char;
use std::panic::{catch_unwind, AssertUnwindSafe};

/// What a call returns: [`LG_OK`] (done; for a check, admitted), [`LG_DENIED`] (a check that did
/// not conform), or a negative `LG_ERR_*` code saying why the call did nothing.
pub type LgStatus = i32;

/// Done; for a check, the request conformed and its units were taken.
pub const LG_OK: LgStatus = 0;
/// A check that did not conform: nothing was taken.
pub const LG_DENIED: LgStatus = 1;
/// A pointer the call needs was NULL.
pub const LG_ERR_NULL: LgStatus = -1;
/// A quota could not be built: a string that does not parse, a count, period or burst of zero,
/// a rate or burst out of range; for a meter, quotas that do not make one (a trTCM whose peak
/// rate is below its committed rate, or whose quotas count different units; an srTCM whose
/// CBS + EBS is out of range).
pub const LG_ERR_QUOTA: LgStatus = -2;
/// Another argument was out of range: a capacity above 2^30, a colour other than 0, 1 or 2, a
/// pointer not aligned for its type, an array longer than memory, text that is not UTF-8.
pub const LG_ERR_ARGUMENT: LgStatus = -3;
/// leakgate panicked inside the call (a bug: please report it). The panic was caught: nothing
/// crossed into C, and the handle may be used and freed as usual (Rust's default panic hook
/// has printed the message to stderr).
pub const LG_ERR_PANIC: LgStatus = -4;

/// Why a call failed, inside the crate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Error {
    /// [`LG_ERR_NULL`].
    Null,
    /// [`LG_ERR_QUOTA`].
    Quota,
    /// [`LG_ERR_ARGUMENT`].
    Argument,
}

impl Error {
    /// The status code C sees.
    pub(crate) fn code(self) -> LgStatus {
        match self {
            Error::Null => LG_ERR_NULL,
            Error::Quota => LG_ERR_QUOTA,
            Error::Argument => LG_ERR_ARGUMENT,
        }
    }
}

/// Runs the body of an extern function: its status, the code of its error, or [`LG_ERR_PANIC`]
/// if it panicked.
///
/// The closure is asserted unwind-safe: after a panic the call reports [`LG_ERR_PANIC`] and
/// writes nothing more, and leakgate's types keep their invariants at every step (lock-free
/// words change only by whole CASes), so a handle a panic left behind is still sound to use.
#[inline(always)]
pub(crate) fn guard(body: impl FnOnce() -> Result<LgStatus, Error>) -> LgStatus {
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(Ok(status)) => status,
        Ok(Err(error)) => error.code(),
        Err(_) => LG_ERR_PANIC,
    }
}

/// [`guard`] for a function with nothing to return (the `*_free` functions).
#[inline(always)]
pub(crate) fn guard_unit(body: impl FnOnce()) {
    let _ = catch_unwind(AssertUnwindSafe(body));
}

/// A static, NUL-terminated English description of `status`, for logs: `"admitted"`,
/// `"denied"`, `"a required pointer was NULL"`, and so on; `"unknown status"` for a code that is
/// not one of the `LG_*` codes. Never NULL; the string lives as long as the program.
///
/// ```
/// use leakgate_ffi::{lg_status_str, LG_ERR_QUOTA};
/// let text = unsafe { std::ffi::CStr::from_ptr(lg_status_str(LG_ERR_QUOTA)) };
/// assert_eq!(text.to_str(), Ok("invalid quota"));
/// ```
#[no_mangle]
pub extern "C" fn lg_status_str(status: LgStatus) -> *const c_char {
    let text = match status {
        LG_OK => c"admitted (or done)",
        LG_DENIED => c"denied",
        LG_ERR_NULL => c"a required pointer was NULL",
        LG_ERR_QUOTA => c"invalid quota",
        LG_ERR_ARGUMENT => c"invalid argument",
        LG_ERR_PANIC => c"internal error (a panic was caught)",
        _ => c"unknown status",
    };
    text.as_ptr()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panic_becomes_a_status() {
        let status = guard(|| -> Result<LgStatus, Error> { panic!("inside leakgate") });
        assert_eq!(status, LG_ERR_PANIC);
        assert_eq!(guard(|| Err(Error::Argument)), LG_ERR_ARGUMENT);
        assert_eq!(guard(|| Ok(LG_DENIED)), LG_DENIED);
        guard_unit(|| panic!("in a free"));
    }

    #[test]
    fn every_status_has_a_text() {
        for status in
            [LG_OK, LG_DENIED, LG_ERR_NULL, LG_ERR_QUOTA, LG_ERR_ARGUMENT, LG_ERR_PANIC, 7]
        {
            // SAFETY-free: the pointer is a static C string.
            let text = crate::raw::text(lg_status_str(status), crate::LG_NUL_TERMINATED).unwrap();
            assert!(!text.is_empty());
        }
    }
}
