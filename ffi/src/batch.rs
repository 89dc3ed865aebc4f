//! Batch checks of the keyed limiters: a burst of keys and costs decided at one time, their
//! buckets fetched together (leakgate's `KeyedLimiter::check_batch_at`).
//!
//! C's arrays are taken as they are; the Rust call wants a slice of key references and a slice
//! of `bool`s, which are built on the stack for chunks of [`CHUNK`] requests, so nothing is
//! allocated. Chunks are decided in order, all at the same time, so the answers are those of
//! the checks one by one, in order. Every array is checked before anything is decided: a bad
//! argument decides nothing.

use crate::clock::ProcessClock;
use crate::keyed::LgKeyed;
use crate::keyed_bytes::LgKeyedBytes;
use crate::raw;
use crate::status::{guard, Error, LgStatus, LG_OK};
use leakgate::{Clock, KeyedLimiter};
use std::borrow::Borrow;
use std::hash::Hash;

/// Requests per call of the Rust batch: two DPDK bursts of 32.
const CHUNK: usize = 64;

/// Decides the requests `key(i)` / `costs[i]` at `now_ns` (or the clock, read once) in chunks,
/// writes each answer (1 admitted, 0 denied) to `admitted` if given and the count to `count` if
/// not NULL.
fn decide<'a, K, Q>(
    table: &KeyedLimiter<K, ProcessClock>,
    (key, filler): (impl Fn(usize) -> &'a Q, &'a Q),
    costs: &[u64],
    now_ns: Option<u64>,
    (mut admitted, count): (Option<&mut [u8]>, *mut usize),
) -> LgStatus
where
    K: Hash + Eq + Clone + Send + Sync + Borrow<Q>,
    Q: Hash + Eq + ?Sized + ToOwned<Owned = K>,
{
    let now_ns = now_ns.unwrap_or_else(|| table.clock().now_ns());
    let (mut refs, mut ok, mut total) = ([filler; CHUNK], [false; CHUNK], 0);
    for start in (0..costs.len()).step_by(CHUNK) {
        let end = (start + CHUNK).min(costs.len());
        let n = end - start;
        for (i, r) in refs[..n].iter_mut().enumerate() {
            *r = key(start + i);
        }
        total += table.check_batch_at(&refs[..n], &costs[start..end], now_ns, &mut ok[..n]);
        if let Some(out) = admitted.as_deref_mut() {
            for (o, &a) in out[start..end].iter_mut().zip(&ok[..n]) {
                *o = u8::from(a);
            }
        }
    }
    raw::write_optional(count, || total);
    LG_OK
}

/// `admitted` as a slice of `len`, or `None` when NULL.
fn flags<'a>(admitted: *mut u8, len: usize) -> Result<Option<&'a mut [u8]>, Error> {
    match admitted.is_null() {
        true => Ok(None),
        false => raw::slice_mut(admitted, len).map(Some),
    }
}

/// Checks a burst of `len` requests at one reading of the clock: request number `i` costs entry `i`
/// of `costs` in units of the bucket of entry `i` of `keys`; [`lg_keyed_check_batch_at`] at
/// [`lg_now_ns`](crate::lg_now_ns).
///
/// # Safety
/// As [`lg_keyed_check_batch_at`].
#[no_mangle]
pub unsafe extern "C" fn lg_keyed_check_batch(
    keyed: *const LgKeyed,
    keys: *const u64,
    costs: *const u64,
    len: usize,
    admitted: *mut u8,
    admitted_count: *mut usize,
) -> LgStatus {
    batch_u64(keyed, (keys, costs, len), None, (admitted, admitted_count))
}

/// Checks a burst of `len` requests at `now_ns` (a reading of [`lg_now_ns`](crate::lg_now_ns)):
/// request number `i` costs entry `i` of `costs` in units of the bucket of entry `i` of `keys`. The
/// answers are those of [`lg_keyed_check_n_at`](crate::lg_keyed_check_n_at) called for each request
/// in order (a key named twice is charged twice), but the buckets of several keys are fetched from
/// memory together, so a large table costs a fraction of the single checks. Entry `i` of `admitted`
/// is set to 1 (admitted) or 0 (denied), unless `admitted` is NULL; `*admitted_count` gets the
/// number admitted, unless NULL. Allocates nothing.
///
/// Returns [`LG_OK`], or [`LG_ERR_NULL`](crate::LG_ERR_NULL) (a NULL table, or a NULL array
/// with `len` > 0) or [`LG_ERR_ARGUMENT`](crate::LG_ERR_ARGUMENT) (a misaligned array), having
/// decided nothing.
///
/// # Safety
/// `keyed` a live handle; `keys` and `costs` readable for `len` elements; `admitted` NULL or
/// writable for `len` bytes; `admitted_count` NULL or writable ([the pointer
/// rules](crate#pointers)).
///
/// ```
/// use leakgate_ffi::*;
/// use std::ptr::null_mut;
/// let (mut q, mut flows) = (LgQuota::default(), null_mut());
/// unsafe {
///     lg_quota_bytes(1500, 1_000_000_000, 3000, &mut q); // 1500 bytes a second, 3000 at once
///     lg_keyed_new(&q, 0, &mut flows);
///     let (keys, lens) = ([1u64, 2, 1, 1], [1500u64, 64, 1500, 1]);
///     let (mut sent, mut count) = ([0u8; 4], 0usize);
///     let now = lg_now_ns(); // once per receive burst
///     let status = lg_keyed_check_batch_at(flows, keys.as_ptr(), lens.as_ptr(), 4, now, sent.as_mut_ptr(), &mut count);
///     assert_eq!((status, sent, count), (LG_OK, [1, 1, 1, 0], 3));
///     lg_keyed_free(flows);
/// }
/// ```
#[no_mangle]
pub unsafe extern "C" fn lg_keyed_check_batch_at(
    keyed: *const LgKeyed,
    keys: *const u64,
    costs: *const u64,
    len: usize,
    now_ns: u64,
    admitted: *mut u8,
    admitted_count: *mut usize,
) -> LgStatus {
    batch_u64(keyed, (keys, costs, len), Some(now_ns), (admitted, admitted_count))
}

fn batch_u64(
    keyed: *const LgKeyed,
    (keys, costs, len): (*const u64, *const u64, usize),
    now_ns: Option<u64>,
    (admitted, count): (*mut u8, *mut usize),
) -> LgStatus {
    guard(|| {
        let table = &raw::handle(keyed)?.0;
        let (keys, costs) = (raw::slice(keys, len)?, raw::slice(costs, len)?);
        let admitted = flags(admitted, len)?;
        Ok(decide(table, (|i| &keys[i], &0), costs, now_ns, (admitted, count)))
    })
}

/// [`lg_keyed_bytes_check_batch_at`] at one reading of [`lg_now_ns`](crate::lg_now_ns).
///
/// # Safety
/// As [`lg_keyed_bytes_check_batch_at`].
#[no_mangle]
pub unsafe extern "C" fn lg_keyed_bytes_check_batch(
    keyed: *const LgKeyedBytes,
    keys: *const *const u8,
    key_lens: *const usize,
    costs: *const u64,
    len: usize,
    admitted: *mut u8,
    admitted_count: *mut usize,
) -> LgStatus {
    batch_bytes(keyed, (keys, key_lens, costs, len), None, (admitted, admitted_count))
}

/// [`lg_keyed_check_batch_at`] for byte-string keys: key number `i` is the bytes at
/// entry `i` of `keys`, as many as entry `i` of `key_lens` says (NULL only for a key of length 0).
///
/// # Safety
/// `keyed` a live handle; `keys`, `key_lens` and `costs` readable for `len` elements, each pointer
/// in `keys` readable for its length in `key_lens`; `admitted` NULL or writable for `len` bytes;
/// `admitted_count` NULL or writable ([the pointer rules](crate#pointers)).
#[no_mangle]
pub unsafe extern "C" fn lg_keyed_bytes_check_batch_at(
    keyed: *const LgKeyedBytes,
    keys: *const *const u8,
    key_lens: *const usize,
    costs: *const u64,
    len: usize,
    now_ns: u64,
    admitted: *mut u8,
    admitted_count: *mut usize,
) -> LgStatus {
    batch_bytes(keyed, (keys, key_lens, costs, len), Some(now_ns), (admitted, admitted_count))
}

fn batch_bytes(
    keyed: *const LgKeyedBytes,
    (keys, key_lens, costs, len): (*const *const u8, *const usize, *const u64, usize),
    now_ns: Option<u64>,
    (admitted, count): (*mut u8, *mut usize),
) -> LgStatus {
    guard(|| {
        let table = &raw::handle(keyed)?.0;
        let (keys, key_lens) = (raw::slice(keys, len)?, raw::slice(key_lens, len)?);
        let costs = raw::slice(costs, len)?;
        let admitted = flags(admitted, len)?;
        // Every key checked before any is decided.
        for (&key, &key_len) in keys.iter().zip(key_lens) {
            raw::slice(key, key_len)?;
        }
        // Checked above: `unwrap_or` never takes its default.
        let key = |i: usize| raw::slice(keys[i], key_lens[i]).unwrap_or(&[]);
        Ok(decide(table, (key, &[][..]), costs, now_ns, (admitted, count)))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{
        lg_keyed_bytes_check_n_at, lg_keyed_bytes_free, lg_keyed_bytes_new, lg_keyed_check_n_at,
        lg_keyed_free, lg_keyed_new, lg_now_ns, LgQuota, LG_ERR_NULL,
    };
    use std::ptr::{null, null_mut};

    const QUOTA: LgQuota = LgQuota { count: 10, period_ns: 1_000_000_000, burst: 10, bytes: 0 };

    /// 300 requests over 20 keys (several chunks, keys repeated), costs 0 to 4: a few bits of
    /// a fixed xorshift stream.
    fn requests() -> (Vec<u64>, Vec<u64>) {
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        (0..300)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                (x % 20, (x >> 20) % 5)
            })
            .unzip()
    }

    fn new_keyed() -> *mut LgKeyed {
        let mut keyed = null_mut();
        assert_eq!(unsafe { lg_keyed_new(&QUOTA, 64, &mut keyed) }, LG_OK);
        keyed
    }

    #[test]
    fn a_batch_answers_as_the_checks_one_by_one() {
        let (keys, costs) = requests();
        let (batched, single, now) = (new_keyed(), new_keyed(), lg_now_ns());
        let (mut admitted, mut count) = (vec![9u8; keys.len()], 0usize);
        unsafe {
            let status = lg_keyed_check_batch_at(
                batched,
                keys.as_ptr(),
                costs.as_ptr(),
                keys.len(),
                now,
                admitted.as_mut_ptr(),
                &mut count,
            );
            assert_eq!(status, LG_OK);
            let one_by_one: Vec<u8> = keys
                .iter()
                .zip(&costs)
                .map(|(&k, &c)| {
                    u8::from(lg_keyed_check_n_at(single, k, c, now, null_mut()) == LG_OK)
                })
                .collect();
            assert_eq!(admitted, one_by_one);
            assert_eq!(count, one_by_one.iter().map(|&a| usize::from(a)).sum::<usize>());
            assert!(count > 20 && count < 300, "{count}: some of each");
            lg_keyed_free(batched);
            lg_keyed_free(single);
        }
    }

    #[test]
    fn byte_keys_batch_as_one_by_one() {
        let (keys, costs) = requests();
        let names: Vec<String> = keys.iter().map(|k| format!("client-{k}")).collect();
        let pointers: Vec<*const u8> = names.iter().map(|n| n.as_ptr()).collect();
        let lens: Vec<usize> = names.iter().map(String::len).collect();
        let (mut batched, mut single, now) = (null_mut(), null_mut(), lg_now_ns());
        let mut admitted = vec![9u8; keys.len()];
        unsafe {
            assert_eq!(lg_keyed_bytes_new(&QUOTA, 0, &mut batched), LG_OK);
            assert_eq!(lg_keyed_bytes_new(&QUOTA, 0, &mut single), LG_OK);
            let status = lg_keyed_bytes_check_batch_at(
                batched,
                pointers.as_ptr(),
                lens.as_ptr(),
                costs.as_ptr(),
                keys.len(),
                now,
                admitted.as_mut_ptr(),
                null_mut(),
            );
            assert_eq!(status, LG_OK);
            let one_by_one: Vec<u8> = names
                .iter()
                .zip(&costs)
                .map(|(n, &c)| {
                    let status =
                        lg_keyed_bytes_check_n_at(single, n.as_ptr(), n.len(), c, now, null_mut());
                    u8::from(status == LG_OK)
                })
                .collect();
            assert_eq!(admitted, one_by_one);
            lg_keyed_bytes_free(batched);
            lg_keyed_bytes_free(single);
        }
    }

    #[test]
    fn bad_arrays_decide_nothing() {
        let keyed = new_keyed();
        let (keys, costs, mut count) = ([1u64, 2], [10u64, 10], 7usize);
        unsafe {
            let nothing = lg_keyed_check_batch(keyed, null(), null(), 0, null_mut(), &mut count);
            assert_eq!((nothing, count), (LG_OK, 0));
            assert_eq!(
                lg_keyed_check_batch(keyed, null(), costs.as_ptr(), 2, null_mut(), null_mut()),
                LG_ERR_NULL
            );
            assert_eq!(
                lg_keyed_check_batch(keyed, keys.as_ptr(), null(), 2, null_mut(), null_mut()),
                LG_ERR_NULL
            );
            assert_eq!(
                lg_keyed_check_batch(
                    null(),
                    keys.as_ptr(),
                    costs.as_ptr(),
                    2,
                    null_mut(),
                    null_mut()
                ),
                LG_ERR_NULL
            );
            let misaligned = costs.as_ptr().cast::<u8>().wrapping_add(1).cast::<u64>();
            let status =
                lg_keyed_check_batch(keyed, keys.as_ptr(), misaligned, 1, null_mut(), null_mut());
            assert_eq!(status, crate::LG_ERR_ARGUMENT);
            // Nothing was taken: both keys still have their whole burst (count only).
            let status = lg_keyed_check_batch(
                keyed,
                keys.as_ptr(),
                costs.as_ptr(),
                2,
                null_mut(),
                &mut count,
            );
            assert_eq!((status, count), (LG_OK, 2));
            lg_keyed_free(keyed);

            let mut bytes = null_mut();
            assert_eq!(lg_keyed_bytes_new(&QUOTA, 0, &mut bytes), LG_OK);
            let (a, lens) = (b"a".as_ptr(), [1usize, 1]);
            // Two keys of one byte each, both of cost 10; the count only.
            let batch = |pointers: [*const u8; 2], count: *mut usize| {
                let (keys, costs) = (pointers.as_ptr(), costs.as_ptr());
                lg_keyed_bytes_check_batch(bytes, keys, lens.as_ptr(), costs, 2, null_mut(), count)
            };
            assert_eq!(batch([a, null()], null_mut()), LG_ERR_NULL);
            let status = batch([a, a], &mut count);
            assert_eq!((status, count), (LG_OK, 1)); // "a" was not charged by the bad batch
            lg_keyed_bytes_free(bytes);
        }
    }
}
