//! The timed I/O of each probe kind over an already-open, checked probe file.
//! Blocking by design: callers run it on a dedicated thread, never on the async runtime.

use std::alloc::{Layout, alloc_zeroed, dealloc};
use std::hash::{BuildHasher, Hasher};
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::time::Instant;

/// O_DIRECT needs buffers, offsets and sizes aligned to the logical block size; 4 KiB covers
/// every SSD (512e and 4Kn).
pub const ALIGN: usize = 4096;

/// A heap buffer aligned for O_DIRECT, filled with pseudo-random bytes so that a drive that
/// compresses or deduplicates doesn't see free writes.
pub struct AlignedBuf {
    ptr: *mut u8,
    len: usize,
}

// SAFETY: the buffer is plain owned memory.
unsafe impl Send for AlignedBuf {}

impl AlignedBuf {
    pub fn new(len: usize, rng: &mut Rng) -> AlignedBuf {
        let len = len.max(ALIGN).div_ceil(ALIGN) * ALIGN;
        #[allow(
            clippy::expect_used,
            reason = "ALIGN is a power of two and len a multiple of it, far below isize::MAX"
        )]
        let layout = Layout::from_size_align(len, ALIGN).expect("aligned layout");
        // SAFETY: non-zero size layout.
        let ptr = unsafe { alloc_zeroed(layout) };
        if ptr.is_null() {
            std::alloc::handle_alloc_error(layout);
        }
        let mut b = AlignedBuf { ptr, len };
        for chunk in b.bytes_mut().chunks_mut(8) {
            let v = rng.next_u64().to_ne_bytes();
            chunk.copy_from_slice(&v[..chunk.len()]);
        }
        b
    }

    pub fn bytes_mut(&mut self) -> &mut [u8] {
        // SAFETY: ptr valid for len bytes, uniquely borrowed.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len) }
    }

    pub fn as_ptr(&self) -> *const u8 {
        self.ptr
    }

    pub fn as_mut_ptr(&mut self) -> *mut u8 {
        self.ptr
    }
}

impl Drop for AlignedBuf {
    fn drop(&mut self) {
        // SAFETY: allocated with this exact layout.
        unsafe { dealloc(self.ptr, Layout::from_size_align_unchecked(self.len, ALIGN)) };
    }
}

/// xorshift64*: offsets and buffer contents only, nothing cryptographic.
pub struct Rng(u64);

impl Rng {
    pub fn seeded() -> Rng {
        let s = std::collections::hash_map::RandomState::new()
            .build_hasher()
            .finish();
        Rng(s | 1)
    }

    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// An aligned block offset inside a file of `file_size` bytes for a `block`-byte I/O.
    pub fn offset(&mut self, file_size: u64, block: u64) -> u64 {
        let blocks = (file_size / block).max(1);
        (self.next_u64() % blocks) * block
    }
}

/// Puts the calling thread in the idle I/O scheduling class: its I/O is served only when no one
/// else wants the disk (honoured by the BFQ scheduler; others ignore it).
pub fn set_idle_priority() -> io::Result<()> {
    const IOPRIO_WHO_PROCESS: libc::c_long = 1;
    const IOPRIO_CLASS_IDLE: libc::c_long = 3;
    const IOPRIO_CLASS_SHIFT: libc::c_long = 13;
    // SAFETY: plain syscall; who=0 means the calling thread.
    let r = unsafe {
        libc::syscall(
            libc::SYS_ioprio_set,
            IOPRIO_WHO_PROCESS,
            0 as libc::c_long,
            IOPRIO_CLASS_IDLE << IOPRIO_CLASS_SHIFT,
        )
    };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

pub fn pwrite_all(fd: &OwnedFd, buf: &AlignedBuf, len: usize, off: u64) -> io::Result<()> {
    // SAFETY: buf valid for len (<= buf.len) bytes; fd open.
    let n = unsafe { libc::pwrite(fd.as_raw_fd(), buf.as_ptr().cast(), len, off as libc::off_t) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    if n as usize != len {
        return Err(io::Error::new(io::ErrorKind::WriteZero, "short write"));
    }
    Ok(())
}

pub fn pread_all(fd: &OwnedFd, buf: &mut AlignedBuf, len: usize, off: u64) -> io::Result<()> {
    // SAFETY: buf valid for len bytes; fd open.
    let n = unsafe {
        libc::pread(
            fd.as_raw_fd(),
            buf.as_mut_ptr().cast(),
            len,
            off as libc::off_t,
        )
    };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    if n as usize != len {
        return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "short read"));
    }
    Ok(())
}

/// `ops` 4 KiB writes at consecutive offsets (like a log append) through an O_DSYNC fd: each
/// write returns only when the data is durable, as a database commit does.
pub fn sync_write(fd: &OwnedFd, file_size: u64, ops: u32, rng: &mut Rng) -> io::Result<Vec<f64>> {
    let buf = AlignedBuf::new(ALIGN, rng);
    let blocks = (file_size / ALIGN as u64).max(1);
    let start = rng.offset(file_size, ALIGN as u64) / ALIGN as u64;
    let mut lat = Vec::with_capacity(ops as usize);
    for i in 0..ops as u64 {
        let off = ((start + i) % blocks) * ALIGN as u64;
        let t = Instant::now();
        pwrite_all(fd, &buf, ALIGN, off)?;
        lat.push(t.elapsed().as_secs_f64());
    }
    Ok(lat)
}

/// `ops` 4 KiB O_DIRECT reads at random offsets over the whole file.
pub fn rand_read(fd: &OwnedFd, file_size: u64, ops: u32, rng: &mut Rng) -> io::Result<Vec<f64>> {
    let mut buf = AlignedBuf::new(ALIGN, rng);
    let mut lat = Vec::with_capacity(ops as usize);
    for _ in 0..ops {
        let off = rng.offset(file_size, ALIGN as u64);
        let t = Instant::now();
        pread_all(fd, &mut buf, ALIGN, off)?;
        lat.push(t.elapsed().as_secs_f64());
    }
    Ok(lat)
}

/// `ops` 4 KiB O_DIRECT writes at random offsets, spread over `depth` threads so that up to
/// `depth` writes are in flight, the pattern under which SSD latency degrades first.
pub fn rand_write(
    fd: &OwnedFd,
    file_size: u64,
    ops: u32,
    depth: u32,
    idle: bool,
) -> io::Result<Vec<f64>> {
    let depth = depth.clamp(1, 64);
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..depth)
            .map(|i| {
                let n = ops / depth + u32::from(i < ops % depth);
                s.spawn(move || -> io::Result<Vec<f64>> {
                    if idle {
                        let _ = set_idle_priority();
                    }
                    let mut rng = Rng::seeded();
                    let buf = AlignedBuf::new(ALIGN, &mut rng);
                    let mut lat = Vec::with_capacity(n as usize);
                    for _ in 0..n {
                        let off = rng.offset(file_size, ALIGN as u64);
                        let t = Instant::now();
                        pwrite_all(fd, &buf, ALIGN, off)?;
                        lat.push(t.elapsed().as_secs_f64());
                    }
                    Ok(lat)
                })
            })
            .collect();
        let mut all = Vec::with_capacity(ops as usize);
        for h in handles {
            match h.join() {
                Ok(r) => all.extend(r?),
                Err(_) => return Err(io::Error::other("probe thread panicked")),
            }
        }
        Ok(all)
    })
}

/// A sequential O_DIRECT burst of `total` bytes in `block`-byte writes, then one fdatasync so the
/// figure includes getting the data to stable storage. Returns per-write latencies and the
/// whole burst's duration.
pub fn seq_write(
    fd: &OwnedFd,
    file_size: u64,
    total: u64,
    block: u64,
    rng: &mut Rng,
) -> io::Result<(Vec<f64>, f64)> {
    let block = block.max(ALIGN as u64).div_ceil(ALIGN as u64) * ALIGN as u64;
    let buf = AlignedBuf::new(block as usize, rng);
    let n = total.div_ceil(block);
    let slots = (file_size / block).max(1);
    let start_slot = rng.next_u64() % slots;
    let mut lat = Vec::with_capacity(n as usize);
    let t0 = Instant::now();
    for i in 0..n {
        let off = ((start_slot + i) % slots) * block;
        let t = Instant::now();
        pwrite_all(fd, &buf, block as usize, off)?;
        lat.push(t.elapsed().as_secs_f64());
    }
    // SAFETY: valid fd.
    if unsafe { libc::fdatasync(fd.as_raw_fd()) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok((lat, t0.elapsed().as_secs_f64()))
}

/// Fills a freshly preallocated file with real data, so later reads hit the drive (reads of
/// unwritten extents are answered by the filesystem without any I/O).
pub fn fill(fd: &OwnedFd, file_size: u64, rng: &mut Rng) -> io::Result<()> {
    let block: u64 = 1 << 20;
    let buf = AlignedBuf::new(block as usize, rng);
    let mut off = 0;
    while off < file_size {
        let len = block.min(file_size - off);
        pwrite_all(fd, &buf, len as usize, off)?;
        off += len;
    }
    // SAFETY: valid fd.
    if unsafe { libc::fdatasync(fd.as_raw_fd()) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}
