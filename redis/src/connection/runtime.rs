//! The one-thread tokio runtime a blocking limiter runs its connection on.

use crate::error::Error;
use std::future::Future;
use tokio::runtime::{Handle, Runtime};

/// A runtime of the limiter's own, and how blocking calls drive futures on it.
pub(crate) struct OwnRuntime {
    handle: Handle,
    /// Kept only to be shut down without blocking when the limiter is dropped.
    runtime: Option<Runtime>,
}

impl OwnRuntime {
    /// Starts a runtime with one worker thread.
    pub(crate) fn start() -> Result<OwnRuntime, Error> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("leakgate-redis")
            .enable_all()
            .build()
            .map_err(|e| Error::Config(format!("cannot start the limiter's runtime: {e}")))?;
        Ok(OwnRuntime { handle: runtime.handle().clone(), runtime: Some(runtime) })
    }

    /// Drives `fut` to completion on this runtime. From inside another runtime, where blocking
    /// the thread in `block_on` is not allowed, it blocks a scoped thread instead.
    pub(crate) fn run<F: Future + Send>(&self, fut: F) -> F::Output
    where
        F::Output: Send,
    {
        if Handle::try_current().is_err() {
            return self.handle.block_on(fut);
        }
        std::thread::scope(|s| {
            s.spawn(|| self.handle.block_on(fut))
                .join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
        })
    }
}

impl Drop for OwnRuntime {
    fn drop(&mut self) {
        if let Some(runtime) = self.runtime.take() {
            // Not `drop`: that blocks, and panics when the limiter is dropped in async code.
            runtime.shutdown_background();
        }
    }
}
