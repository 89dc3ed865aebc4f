//! Colour meters: the single-rate and two-rate three-colour markers of RFC 2697 ([`SrTcm`]) and
//! RFC 2698 ([`TrTcm`]), for one stream or one per flow ([`KeyedSrTcm`], [`KeyedTrTcm`]).
//!
//! # Implementation details
//!
//! **Every bucket is one GCRA word, in ticks.** The RFCs describe token buckets that start full
//! and gain one token (byte) at each tick of their rate, up to their size. A GCRA word counted in
//! whole emission intervals (`Rate::in_intervals`: one unit is `T = 1 / rate`, and a clock
//! reading `t` counts the ticks `floor(t / T)` since the clock's origin, exactly: `Ticks`) *is*
//! such a bucket: it holds `burst - max(TAT - t, 0)` tokens, a new word (`TAT = 0`) is full, a
//! packet of `B` conforms iff that is at least `B`, and taking it moves `TAT` to
//! `max(TAT, t) + B`. So the meters give exactly the RFCs' colours for ticks at the multiples
//! of `T` (tick `k` counts from the first nanosecond at or after `k * T`), at every rate and
//! every clock reading.
//!
//! **srTCM: the excess bucket as the total.** In RFC 2697 each tick goes to `C` if `C` is not
//! full, else to `E` if `E` is not full: `E` fills only with what overflows `C`. That is not a
//! bucket of its own rate, but two facts make it two GCRA words of rate CIR:
//!
//! * `C` alone gains a token at every tick while below CBS, whatever `E` does: a bucket of size
//!   CBS, taken by green packets. Word `C`.
//! * The total `Tc + Te` gains a token at every tick while below CBS + EBS (the tick goes to one
//!   of the two unless both are full): a bucket of size CBS + EBS, taken by green and yellow
//!   packets alike. Word `A`.
//!
//! So `Te = Total - Tc = EBS - X` with `X = max(A, t) - max(C, t)`, E's deficit in ticks. A
//! packet is green iff `C` conforms `B`; yellow iff `X + B <= EBS`, which is the GCRA step of
//! word `A` with a burst of EBS at the time `max(C, t)`: from `max(A, max(C, t))`, which is
//! `max(A, t)` since `A >= C` (both take every green, only `A` yellows, both drain alike), it
//! conforms iff `max(A, t) + B - max(C, t) <= EBS`, and leaves `A` at `max(A, t) + B`, where a
//! yellow packet must leave it. Green takes both words, yellow `A` only, red neither.
//!
//! **All or nothing, without locks.** A packet's charges are exactly its colour's:
//!
//! * *trTCM* (`P`, then `C`): red iff `P` refuses (nothing taken); else `C` decides green (both
//!   taken) or yellow (`P` only). The second step's answer is the colour: nothing is ever given
//!   back.
//! * *srTCM*. `C` is read first; if it would conform the packet goes for green: `A`, then a
//!   `Release` fence, then `C`. If `C` refuses after all (another green took it meanwhile), the
//!   packet is yellow if `X <= EBS` on the words as they are now (its charge is in `A`
//!   already), and otherwise red: its charge of `A` is given back (`bucket::give_back`: the
//!   whole charge on a clock that has not moved since; less the time since otherwise, an
//!   over-charge that only refuses more and drains with the clock). That race is the only
//!   give-back: a packet the words show red from the start (`B` above both `Tc` and `Te`, even
//!   if not above their sum) takes nothing. If `C` would not conform, the packet goes for
//!   yellow: one GCRA step on `A` as above, with `C` as read.
//! * *Why yellow checks are never loose.* `X` is computed from `C` and then `A`: green charges
//!   reach `A` before `C`, and `C`'s readers load with `Acquire` (every write of `C` is a
//!   read-modify-write, so a reader that sees any value at or after a green's charge of `C` sees
//!   that green's charge of `A`). A green in flight therefore shows in `A` before `C`, which
//!   only makes `X` larger. `C` never goes down (it is never given back) and never shows more
//!   than it admitted (its word takes no unconditional adds): a larger `C` would make `X`
//!   smaller. `A` may only show more than it admitted (over-charges), which makes `X` larger.
//!   So no packet is ever yellow where `E`, counting every packet before it, could not pay.
//! * *Leases of green units* (`leased_sr.rs`, `leased_tr.rs`, opt-in). A green-only take of a
//!   lease charges as a green packet does, and gives back what it charged if `C` refuses it
//!   after all: the srTCM's charge of `A` as in its race above, the trTCM's charge of `P` the
//!   same way (`bucket::give_back`, exact on a clock that has not moved, an over-charge that only
//!   refuses more otherwise). Nothing is ever given back to `C`.
//!
//! Every word takes its charges by CAS only (the bucket protocol without its add path, as keyed
//! slots do), so a word shows exactly what it admitted: a refused packet never leaves a charge
//! behind, save a give-back (the srTCM race's, a lease take's) on a clock that moved. Every bucket's word is its own
//! GCRA bucket under the bucket protocol, so no bucket ever
//! admits more than `burst + (ticks elapsed)` however many threads meter at once; under threads a
//! packet may get a lower colour than a sequential run would give it, when another packet in
//! flight is counted first.
//!
//! **One owner.** The `_mut` methods of [`SrTcm`] and [`TrTcm`] take `&mut self`, which proves
//! no other thread meters at the same time (a meter per core or per queue, as DPDK keeps
//! `rte_meter`s): they run the same decision on the same words read and written as plain
//! integers (`AtomicU64::get_mut`), with no compare-and-swap and no fence, so every colour and
//! every state is the shared path's for the same packets (see `exclusive.rs`).
//!
//! **Caller time.** The `_at` methods take a reading of the meter's clock made by the caller
//! (once per burst of packets, say) instead of reading it, for a packet loop that reads its
//! clock once per burst. They never allocate or lock (but the first packet of a new flow of a
//! keyed meter takes its table's insert lock). The srTCM race above reads the meter's own clock
//! to give a charge back: the bound that keeps a give-back safe needs a time no earlier than
//! any other packet's, so caller times must come from the meter's clock (`meter.clock()`).

mod exclusive;
#[cfg(feature = "std")]
mod green_leases;
#[cfg(feature = "std")]
mod keyed_slots;
#[cfg(feature = "std")]
mod keyed_sr;
#[cfg(feature = "std")]
mod keyed_tr;
#[cfg(feature = "std")]
mod leased_local;
#[cfg(feature = "std")]
mod leased_sr;
#[cfg(feature = "std")]
mod leased_tr;
mod sr_decide;
mod srtcm;
mod ticks;
mod trtcm;

#[cfg(feature = "std")]
pub use keyed_sr::KeyedSrTcm;
#[cfg(feature = "std")]
pub use keyed_tr::KeyedTrTcm;
#[cfg(feature = "std")]
pub use leased_local::{LeasedMeter, LocalMeter};
#[cfg(feature = "std")]
pub use leased_sr::LeasedSrTcm;
#[cfg(feature = "std")]
pub use leased_tr::LeasedTrTcm;
pub use srtcm::SrTcm;
pub use trtcm::TrTcm;

use crate::quota::QuotaError;
use core::fmt;

/// A packet's colour (RFC 2697 and 2698): green conforms to the committed rate, yellow exceeds
/// it within the excess burst (srTCM) or the peak rate (trTCM), red exceeds both.
///
/// The discriminants are DPDK's (`RTE_COLOR_GREEN` = 0, `YELLOW` = 1, `RED` = 2), and colours
/// order from best to worst.
///
/// ```
/// use leakgate::Color;
/// assert!(Color::Green < Color::Yellow && Color::Yellow < Color::Red);
/// assert_eq!(Color::Red as u8, 2);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum Color {
    /// Within the committed rate and burst.
    Green = 0,
    /// Over the committed rate or burst, within the excess burst (srTCM) or the peak (trTCM).
    Yellow = 1,
    /// Over both.
    Red = 2,
}

/// Why a colour meter could not be built.
///
/// ```
/// use leakgate::{MeterError, Quota, TrTcm};
/// let err = TrTcm::new(Quota::bytes_per_second(1000)?, Quota::bytes_per_second(2000)?);
/// assert_eq!(err.unwrap_err(), MeterError::PeakBelowCommitted);
/// # Ok::<(), leakgate::QuotaError>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum MeterError {
    /// A bucket cannot be built: for an srTCM, the committed quota with a burst of CBS + EBS.
    Quota(QuotaError),
    /// A trTCM's peak rate is below its committed rate (RFC 2698: the PIR must be at least the
    /// CIR).
    PeakBelowCommitted,
    /// A trTCM's two quotas count different units (one counts bytes, the other does not).
    UnitsDiffer,
    /// An srTCM's CBS and EBS are both 0. RFC 2697 needs at least one above 0: with both 0 no
    /// packet could ever be green or yellow.
    ZeroBursts,
}

impl fmt::Display for MeterError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Quota(e) => write!(f, "invalid meter bucket: {e}"),
            Self::PeakBelowCommitted => f.write_str(
                "the peak rate (PIR) of a trTCM must be at least its committed rate (CIR)",
            ),
            Self::UnitsDiffer => f.write_str(
                "the peak and committed quotas of a trTCM must both count bytes, or both not",
            ),
            Self::ZeroBursts => f.write_str(
                "an srTCM needs CBS or EBS above 0 (RFC 2697): with both 0 every packet is red",
            ),
        }
    }
}

impl core::error::Error for MeterError {
    fn source(&self) -> Option<&(dyn core::error::Error + 'static)> {
        match self {
            Self::Quota(e) => Some(e),
            _ => None,
        }
    }
}

impl From<QuotaError> for MeterError {
    fn from(e: QuotaError) -> Self {
        MeterError::Quota(e)
    }
}
