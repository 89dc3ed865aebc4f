//! Handing a bucket's state over to another bucket: [`seal_moved`] closes the first, and
//! [`add_level`] puts what it held on top of the second.
//!
//! Both only raise a word, so they need no lowering hook and can only make a bucket refuse
//! more: the sealed bucket refuses everything, and the one given a level counts it on top of
//! whatever it admitted meanwhile.

use super::Word;

/// Seals `word` for a bucket whose state was handed to another: raises it to `W::MAX_STATE`, a
/// state every request of cost 1 or more is refused at, from the state it held, which it returns
/// (`Ok(None)` if it was sealed already). A check that read the state before the seal and writes
/// after it loses its CAS and sees the seal.
///
/// A `Release` fence comes first: a reader that sees the seal with `Acquire` (a keyed slot's
/// loads are) also sees everything written before the call, for instance where the state went.
pub(crate) fn seal_moved<W: Word>(word: &W) -> Result<Option<u64>, W::Gone> {
    crate::sync::fence(crate::sync::Ordering::Release);
    let mut tat = word.load()?;
    loop {
        if tat == W::MAX_STATE {
            return Ok(None);
        }
        match word.compare_exchange(tat, W::MAX_STATE) {
            Ok(()) => return Ok(Some(tat)),
            Err(found) => tat = found?,
        }
    }
}

/// Adds `level` units of backlog to the bucket in `word` at time `now` (units): its state becomes
/// `max(state, now) + level`, saturating below `W::MAX_STATE` (a sealed bucket stays sealed).
pub(crate) fn add_level<W: Word>(word: &W, level: u64, now: u64) -> Result<(), W::Gone> {
    let mut tat = word.load()?;
    while level > 0 && tat < W::MAX_STATE {
        let new = tat.max(now).saturating_add(level).min(W::MAX_STATE - 1);
        match word.compare_exchange(tat, new) {
            Ok(()) => break,
            Err(found) => tat = found?,
        }
    }
    Ok(())
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::sync::{AtomicU64, Ordering};

    #[test]
    fn sealing_returns_the_state_once() {
        let word = AtomicU64::new(440);
        assert_eq!(seal_moved(&word), Ok(Some(440)));
        assert_eq!(AtomicU64::load(&word, Ordering::Relaxed), u64::MAX);
        assert_eq!(seal_moved(&word), Ok(None));
    }

    #[test]
    fn a_level_goes_on_top_of_what_was_admitted_meanwhile() {
        let word = AtomicU64::new(100);
        add_level(&word, 40, 400).unwrap(); // idle: from now
        assert_eq!(AtomicU64::load(&word, Ordering::Relaxed), 440);
        add_level(&word, 40, 400).unwrap(); // busy: on top
        assert_eq!(AtomicU64::load(&word, Ordering::Relaxed), 480);
        let sealed = AtomicU64::new(u64::MAX);
        add_level(&sealed, 40, 400).unwrap();
        assert_eq!(AtomicU64::load(&sealed, Ordering::Relaxed), u64::MAX);
    }
}
