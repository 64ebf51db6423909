//! What the code under test logs on the calling thread, read back by a test.
//!
//! One subscriber for the whole test binary, installed once as the global default at INFO,
//! hands each event to a buffer the current thread registered, if any. A subscriber set per
//! thread (`tracing::subscriber::set_default`) is not enough when tests run in parallel: a call
//! site first reached by another thread, under no subscriber, can be cached as disabled, and the
//! capturing thread then misses its events now and then.

use std::cell::RefCell;
use std::sync::{Arc, Mutex, Once};

thread_local! {
    static CAPTURE: RefCell<Option<Arc<Mutex<Vec<u8>>>>> = const { RefCell::new(None) };
}

/// Captures this thread's log lines (INFO and above) until dropped.
pub struct Captured(Arc<Mutex<Vec<u8>>>);

impl Captured {
    /// Everything captured so far, as text.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
    }
}

impl Drop for Captured {
    fn drop(&mut self) {
        CAPTURE.with(|c| c.borrow_mut().take());
    }
}

struct ThreadWriter;

impl std::io::Write for ThreadWriter {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        CAPTURE.with(|c| {
            if let Some(buf) = c.borrow().as_ref() {
                buf.lock().unwrap().extend_from_slice(b);
            }
        });
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Starts capturing what this thread logs.
pub fn capture() -> Captured {
    static INSTALL: Once = Once::new();
    INSTALL.call_once(|| {
        let subscriber = tracing_subscriber::fmt()
            .with_max_level(tracing::Level::INFO)
            .with_ansi(false)
            .with_writer(|| ThreadWriter)
            .finish();
        tracing::subscriber::set_global_default(subscriber)
            .expect("no other global subscriber in a test binary");
    });
    let buf = Arc::new(Mutex::new(Vec::new()));
    CAPTURE.with(|c| *c.borrow_mut() = Some(buf.clone()));
    Captured(buf)
}
