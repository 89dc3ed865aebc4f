//! The only module with `unsafe` code: what C passes in (handles, out-parameters, arrays, text)
//! turned into references and values, and handles turned back into boxes.
//!
//! # Implementation details
//!
//! Every function here checks what can be checked (NULL, alignment, a length whose bytes would
//! pass `isize::MAX`) and returns [`Error`] for it, and relies for the rest on the contract every
//! extern function states in its `# Safety` section ([the pointer rules](crate#pointers)):
//!
//! * a handle is NULL or what this crate's `*_new` wrote, not yet freed, and not freed until
//!   every call on it has returned; a handle given to an `_excl` function is used by no other
//!   call while that one runs;
//! * an input pointer with a length is NULL (allowed only with length 0) or points to that many
//!   readable elements that no one writes during the call;
//! * an output pointer is NULL (where the function allows it) or points to writable memory for
//!   its element(s) that no one else reads or writes during the call;
//! * text with [`LG_NUL_TERMINATED`] as its length ends with a NUL byte.
//!
//! That is why the functions here are safe to call from the rest of the crate although they
//! dereference raw pointers: every pointer they get comes straight from an `unsafe extern "C"`
//! function's arguments, whose caller promised the above. Nothing else in the crate uses `unsafe`
//! (the crate denies `unsafe_code` everywhere but here).
#![allow(unsafe_code)]

use crate::status::Error;
use std::ffi::{c_char, CStr};

/// The length of a text that ends with a NUL byte (`SIZE_MAX`): pass it as `len` to read up to
/// the NUL.
pub const LG_NUL_TERMINATED: usize = usize::MAX;

/// A shared reference to the handle `p` points to.
///
/// `Err(Null)` for NULL, `Err(Argument)` for a pointer not aligned for `T` (not a handle).
#[inline(always)]
pub(crate) fn handle<'a, T>(p: *const T) -> Result<&'a T, Error> {
    if p.is_null() {
        return Err(Error::Null);
    }
    if !p.is_aligned() {
        return Err(Error::Argument);
    }
    // SAFETY: non-NULL and aligned here; by the contract a live handle made by `into_handle`,
    // which nothing frees while this call runs, and which is only ever shared (`&T`).
    Ok(unsafe { &*p })
}

/// An exclusive reference to the handle `p` points to, for the `_excl` functions.
///
/// `Err(Null)` for NULL, `Err(Argument)` for a pointer not aligned for `T` (not a handle).
#[inline(always)]
pub(crate) fn handle_mut<'a, T>(p: *mut T) -> Result<&'a mut T, Error> {
    if p.is_null() {
        return Err(Error::Null);
    }
    if !p.is_aligned() {
        return Err(Error::Argument);
    }
    // SAFETY: non-NULL and aligned here; by the contract a live handle made by `into_handle`,
    // which nothing frees while this call runs, and (rule 5 for the `_excl` functions, the only
    // callers) that no other call uses while this one runs: no other reference to it exists
    // for as long as this one is used.
    Ok(unsafe { &mut *p })
}

/// A new handle owning `value`, to be given back to [`free`] exactly once.
pub(crate) fn into_handle<T>(value: T) -> *mut T {
    Box::into_raw(Box::new(value))
}

/// Makes a handle for the out-parameter `out`: [`Error::Null`] for a NULL `out` before `make`
/// runs (a call that cannot return its handle builds nothing), else `make()`'s value as a new
/// handle (see [`into_handle`]) written to `*out`.
pub(crate) fn write_handle<T>(
    out: *mut *mut T,
    make: impl FnOnce() -> Result<T, Error>,
) -> Result<(), Error> {
    if out.is_null() {
        return Err(Error::Null);
    }
    write(out, into_handle(make()?))
}

/// Drops the handle `p` (made by [`into_handle`]); nothing for NULL or a misaligned pointer.
pub(crate) fn free<T>(p: *mut T) {
    if p.is_null() || !p.is_aligned() {
        return;
    }
    // SAFETY: by the contract `p` came from `into_handle` (`Box::into_raw`), is freed once, and
    // no call on it runs any more: the box is ours again.
    drop(unsafe { Box::from_raw(p) });
}

/// Reads the `T` that `p` points to (any alignment).
pub(crate) fn read<T: Copy>(p: *const T) -> Result<T, Error> {
    if p.is_null() {
        return Err(Error::Null);
    }
    // SAFETY: non-NULL; by the contract readable for one `T`, which is plain data (integers
    // only, every bit pattern valid); `read_unaligned` needs no alignment.
    Ok(unsafe { p.read_unaligned() })
}

/// Writes `value` where `p` points (any alignment, not read first: it may be uninitialized).
pub(crate) fn write<T: Copy>(p: *mut T, value: T) -> Result<(), Error> {
    if p.is_null() {
        return Err(Error::Null);
    }
    write_optional(p, || value);
    Ok(())
}

/// Writes the two halves of `pair` where `first` and `second` point, each only where its
/// pointer is not NULL (a meter's two token counts, say).
pub(crate) fn write_pair_optional<T: Copy>(first: *mut T, second: *mut T, (a, b): (T, T)) {
    write_optional(first, || a);
    write_optional(second, || b);
}

/// Writes `value()` where `p` points, or nothing (and `value` is not called) when `p` is NULL:
/// an optional out-parameter.
#[inline(always)]
pub(crate) fn write_optional<T: Copy>(p: *mut T, value: impl FnOnce() -> T) {
    if p.is_null() {
        return;
    }
    // SAFETY: non-NULL; by the contract writable for one `T` and not accessed by anyone else
    // during the call; `write_unaligned` needs no alignment and reads nothing (the memory may be
    // uninitialized); `T` is plain data with no destructor, so nothing is dropped.
    unsafe { p.write_unaligned(value()) };
}

/// Whether `len` elements of `T` starting at `p` are a slice Rust may form: `p` not NULL
/// (unless `len` is 0), aligned, and the bytes within `isize::MAX`.
fn check_slice<T>(p: *const T, len: usize) -> Result<(), Error> {
    if len == 0 {
        return Ok(());
    }
    if p.is_null() {
        return Err(Error::Null);
    }
    let fits = len.checked_mul(size_of::<T>()).is_some_and(|bytes| bytes <= isize::MAX as usize);
    if !p.is_aligned() || !fits {
        return Err(Error::Argument);
    }
    Ok(())
}

/// The `len` elements at `p` (`p` may be NULL when `len` is 0).
pub(crate) fn slice<'a, T: Copy>(p: *const T, len: usize) -> Result<&'a [T], Error> {
    check_slice(p, len)?;
    if len == 0 {
        return Ok(&[]);
    }
    // SAFETY: checked above: not NULL, aligned, at most isize::MAX bytes; by the contract `len`
    // readable elements of plain data (every bit pattern valid) that no one writes during the
    // call, which is as long as the slice is used.
    Ok(unsafe { std::slice::from_raw_parts(p, len) })
}

/// The `len` elements at `p`, to write (`p` may be NULL when `len` is 0).
pub(crate) fn slice_mut<'a, T: Copy>(p: *mut T, len: usize) -> Result<&'a mut [T], Error> {
    check_slice(p, len)?;
    if len == 0 {
        return Ok(&mut []);
    }
    // SAFETY: as in `slice`, and by the contract writable and accessed by no one else during the
    // call; the elements are plain integers (every bit pattern valid, uninitialized or not is
    // irrelevant as they are only written).
    Ok(unsafe { std::slice::from_raw_parts_mut(p, len) })
}

/// The bytes of a text: `len` bytes at `p`, or up to its NUL byte when `len` is
/// [`LG_NUL_TERMINATED`].
pub(crate) fn text<'a>(p: *const c_char, len: usize) -> Result<&'a [u8], Error> {
    if len != LG_NUL_TERMINATED {
        return slice(p.cast::<u8>(), len);
    }
    if p.is_null() {
        return Err(Error::Null);
    }
    // SAFETY: non-NULL; by the contract a NUL-terminated string that no one writes during the
    // call.
    Ok(unsafe { CStr::from_ptr(p) }.to_bytes())
}
