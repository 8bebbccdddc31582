//! Owning references to a cell: [`CellRef`] (two words, the body's vtable riding
//! along) and [`ThinCell`] (one word, for tables that hold one per process).
//!
//! The count lives in the cell's header, not in an `Arc`'s allocation prefix, so
//! that the last reference can hand the cell's memory to this thread's recycler
//! (`recycle.rs`) instead of the global allocator, and so that the count is a field
//! the loom models see like any other.
//!
//! The protocol is `Arc`'s: a clone adds one (Relaxed: the clone is made from a
//! reference that already keeps the cell alive); a drop takes one away with Release,
//! and the drop that takes the last one fences with Acquire before it destroys the
//! cell, so every use of the cell through any other reference happens before the
//! destruction.

use std::alloc::Layout;
use std::mem::{self, ManuallyDrop};
use std::ops::Deref;
use std::ptr::{self, NonNull};

use crate::engine::cell::{recycle, Header, ProcessCell};
use crate::engine::process::Process;
use crate::engine::queue::lifo::SlotTask;
use crate::sync::{fence, Ordering};

/// A counted, shared reference to a process's cell, as `Arc<ProcessCell>` is.
pub(crate) struct CellRef(NonNull<ProcessCell>);

// SAFETY: a `CellRef` gives shared access to the cell from any thread and may drop
// it on any thread, as an `Arc` does: sound because the cell is `Send` and `Sync`
// (see the `Sync` impl of `ProcessCell`; checked below).
unsafe impl Send for CellRef {}
// SAFETY: as above.
unsafe impl Sync for CellRef {}

/// The bound the impls above rely on, checked at compile time.
const _: () = {
    fn shareable<T: Send + Sync + ?Sized>() {}
    let _ = shareable::<ProcessCell>;
};

/// Counts above this abort the process, as `Arc`'s do: only leaked references
/// (`mem::forget` in a loop) can get there, and a wrapped count would free a cell in
/// use. Half the 32-bit range, so that billions of threads cloning at once are what
/// it takes to wrap before one of them sees the excess.
const MAX_REFS: u32 = i32::MAX as u32;

impl CellRef {
    /// Makes a cell in memory of its own (recycled if this thread has some) and
    /// returns its first reference: `init` writes every field of the cell, in
    /// place, and the header's count must be 1.
    ///
    /// In place, because a cell made first and moved in was built on the stack and
    /// then copied, a `memcpy` of the whole cell (over 100 instructions and a second
    /// pass over its ~350 bytes) on every spawn; passing a closure that returns the
    /// cell did not get rid of it.
    ///
    /// # Safety
    /// `init` initialises every field of the `ProcessCell<P>` it is given a pointer
    /// to, or unwinds before it has written any (its block is then given back
    /// unread: a user's `into_process` may panic).
    #[inline]
    pub(super) unsafe fn new_in_place<P: Process>(init: impl FnOnce(*mut ProcessCell<P>)) -> Self {
        /// Gives the block back if `init` unwinds.
        struct Unmade(NonNull<u8>, Layout);
        impl Drop for Unmade {
            fn drop(&mut self) {
                // SAFETY: the block came from `allocate(self.1)` and nothing was
                // written into it that needs dropping (the caller's promise).
                unsafe { recycle::release(self.0, self.1) };
            }
        }
        let layout = Layout::new::<ProcessCell<P>>();
        let block = recycle::allocate(layout).cast::<ProcessCell<P>>();
        let unmade = Unmade(block.cast(), layout);
        init(block.as_ptr());
        mem::forget(unmade);
        // SAFETY: `init` initialised the cell (the caller's promise).
        debug_assert_eq!(
            unsafe { block.as_ref() }
                .header
                .refs
                .load(Ordering::Relaxed),
            1
        );
        // The unsizing coercion: the body's vtable joins the pointer.
        let fat: NonNull<ProcessCell> = block;
        Self(fat)
    }

    /// The cell's address, for identity checks.
    #[cfg(all(test, not(loom)))]
    pub(crate) fn as_ptr(this: &Self) -> *const ProcessCell {
        this.0.as_ptr()
    }

    /// Whether `a` and `b` are references to the same cell.
    #[cfg(all(test, not(loom)))]
    pub(crate) fn ptr_eq(a: &Self, b: &Self) -> bool {
        ptr::addr_eq(a.0.as_ptr(), b.0.as_ptr())
    }

    /// How many references the cell has (a snapshot, for tests).
    #[cfg(all(test, not(loom)))]
    pub(crate) fn count(this: &Self) -> usize {
        this.refs.load(Ordering::Relaxed) as usize
    }

    /// Another reference to `this`'s cell, owning a count its owner already added
    /// (with a plain store, while it held the only reference).
    ///
    /// # Safety
    /// One count of the cell is owned by nobody, and becomes the new reference's.
    pub(super) unsafe fn adopt(this: &Self) -> Self {
        Self(this.0)
    }

    /// The reference a process that was waiting held for whoever wakes it (see "The
    /// waiting reference" in `state.rs`), taken by the caller that just woke it, to
    /// queue the process with.
    ///
    /// # Safety
    /// The caller's own push (`push_event`, `push_message`) moved the process from
    /// waiting to READY, and the caller takes the reference once.
    pub(crate) unsafe fn woken(this: &Self) -> Self {
        Self(this.0)
    }

    /// The cell, mutably, if this is its only reference.
    pub(crate) fn get_mut(this: &mut Self) -> Option<&mut ProcessCell> {
        // Acquire: pairs with the Release of drops of other references, so their
        // uses happen before ours.
        if this.refs.load(Ordering::Acquire) == 1 {
            // SAFETY: this is the only reference, and `&mut self` keeps it so.
            Some(unsafe { this.0.as_mut() })
        } else {
            None
        }
    }

    /// The reference as a thin pointer to the header, owning its count. Undone by
    /// [`from_thin`](Self::from_thin).
    pub(crate) fn into_thin(this: Self) -> NonNull<Header> {
        // `repr(C)`: the header is at the start of the cell.
        ManuallyDrop::new(this).0.cast::<Header>()
    }

    /// Takes back the count [`into_thin`](Self::into_thin) gave away.
    ///
    /// # Safety
    /// `thin` came from `into_thin`, and its count is not taken back twice.
    pub(crate) unsafe fn from_thin(thin: NonNull<Header>) -> Self {
        // SAFETY: `thin` points to the header of a live cell (its count is still
        // owned), so reading its cell type is sound, and its `to_fat` rebuilds
        // exactly the pointer `into_thin` was given (same address, the body's
        // vtable).
        let fat = unsafe { (thin.as_ref().cell_type().to_fat)(thin.as_ptr()) };
        // SAFETY: as above, not null.
        Self(unsafe { NonNull::new_unchecked(fat.cast_mut()) })
    }

    /// Drops the cell and gives its memory back: the last reference is gone.
    ///
    /// # Safety
    /// No other reference to the cell exists, and every use through earlier ones
    /// happens before this call.
    #[inline(never)]
    unsafe fn destroy(cell: NonNull<ProcessCell>) {
        /// Gives the memory back even if a drop in the cell (user data) panics:
        /// the unwinding drops the other fields, then this.
        struct Release(NonNull<u8>, Layout);
        impl Drop for Release {
            fn drop(&mut self) {
                // SAFETY: the block came from `recycle::allocate` with this layout
                // (in `new`), and the cell in it is dropped by now.
                unsafe { recycle::release(self.0, self.1) };
            }
        }
        // SAFETY: the cell is alive until the `drop_in_place` below. Its type's
        // static holds `Layout::new` of the very `ProcessCell<P>` `new` allocated.
        let layout = {
            let whole = unsafe { cell.as_ref() };
            debug_assert_eq!(whole.cell_type().layout, Layout::for_value(whole));
            whole.cell_type().layout
        };
        // Its handle to the scheduler goes back to this worker's keeping (see
        // `worker::lend_handle`), after everything else of the cell.
        // SAFETY: per the contract, nothing else uses the cell, so taking the
        // handle out of its header (leaving `None` to drop) races with nothing.
        let handle = unsafe { (*ptr::addr_of_mut!((*cell.as_ptr()).header.handle)).take() };
        {
            let _release = Release(cell.cast(), layout);
            // SAFETY: per the contract, nothing else uses the cell; it is dropped
            // once.
            unsafe { ptr::drop_in_place(cell.as_ptr()) };
        }
        if let Some(handle) = handle {
            crate::engine::worker::keep_handle(handle);
        }
    }
}

impl Deref for CellRef {
    type Target = ProcessCell;

    #[inline]
    fn deref(&self) -> &ProcessCell {
        // SAFETY: this reference keeps the cell alive.
        unsafe { self.0.as_ref() }
    }
}

impl Clone for CellRef {
    #[inline]
    fn clone(&self) -> Self {
        if self.refs.fetch_add(1, Ordering::Relaxed) > MAX_REFS {
            std::process::abort();
        }
        Self(self.0)
    }
}

impl Drop for CellRef {
    #[inline]
    fn drop(&mut self) {
        if self.refs.fetch_sub(1, Ordering::Release) != 1 {
            return;
        }
        // Pairs with the Release above of every other reference's drop.
        fence(Ordering::Acquire);
        // SAFETY: this was the last reference, and the fence orders every other
        // reference's uses before this.
        unsafe { Self::destroy(self.0) }
    }
}

/// References to one cell bought in bulk: one atomic add for [`STOCK_BATCH`] counts,
/// handed out as [`CellRef`]s and taken back without touching the count.
///
/// Every yield's completer holds a reference to its process's cell; cloning one and
/// dropping it were two locked instructions per yield, each draining the store
/// buffer right after the step wrote its output (a third of a yield's time when
/// the handler completes at once). A worker keeps a stock for the process it runs:
/// completers made while it dispatches take a count from it, the ones completed
/// straight into the next step give theirs back, and what is left is given back in
/// one subtraction when the run ends.
///
/// Every count in the stock is a real one: a completer that escapes (moved to a
/// thread, kept for later) owns its reference like any other, and the stock holds
/// the cell alive by itself. The borrow of a reference the caller holds only makes
/// buying more sound (an add needs a live cell) and keeps the stock from
/// outliving the run.
pub(crate) struct RefStock<'a> {
    cell: &'a CellRef,
    /// Counts owned by the stock, not yet handed out.
    count: u32,
}

/// How many counts a stock buys at once: a run of a process is at most 33 steps
/// (the worker's re-step budget), each usually yielding one command.
const STOCK_BATCH: u32 = 32;

impl<'a> RefStock<'a> {
    /// An empty stock for `cell`.
    pub(crate) fn new(cell: &'a CellRef) -> Self {
        Self { cell, count: 0 }
    }

    /// Whether `cell` is the stock's cell.
    #[inline]
    pub(crate) fn is_for(&self, cell: &CellRef) -> bool {
        // Addresses only: two `dyn` pointers to one cell may carry different copies
        // of its vtable.
        ptr::addr_eq(self.cell.0.as_ptr(), cell.0.as_ptr())
    }

    /// A reference to the stock's cell, bought with a batch of others when the stock
    /// is empty.
    #[inline]
    pub(crate) fn take(&mut self) -> CellRef {
        if self.count == 0 {
            // Relaxed, as a clone: the borrowed reference keeps the cell alive.
            if self.cell.refs.fetch_add(STOCK_BATCH, Ordering::Relaxed) > MAX_REFS {
                std::process::abort();
            }
            self.count = STOCK_BATCH;
        }
        self.count -= 1;
        CellRef(self.cell.0)
    }

    /// Takes back a reference to the stock's cell, keeping its count.
    #[inline]
    pub(crate) fn put_back(&mut self, cell: CellRef) {
        debug_assert!(self.is_for(&cell), "a reference to another cell");
        // Its count becomes the stock's (which is at most the counts taken out, far
        // below `u32::MAX`).
        std::mem::forget(cell);
        self.count += 1;
    }
}

/// Gives the unused counts back in one subtraction.
impl Drop for RefStock<'_> {
    fn drop(&mut self) {
        if self.count == 0 {
            return;
        }
        // Release, as a drop; never the last count: the borrowed reference is one more.
        let before = self.cell.refs.fetch_sub(self.count, Ordering::Release);
        debug_assert!(before > self.count, "a stock held the last references");
    }
}

impl std::fmt::Debug for CellRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("CellRef").field(&self.pid()).finish()
    }
}

/// An owned reference to a cell in one word (a [`CellRef`] is two: the body's
/// vtable rides along), for tables that hold a reference per process.
pub(crate) struct ThinCell(NonNull<Header>);

// SAFETY: a `ThinCell` is a `CellRef` in another form, and that is `Send` and `Sync`.
unsafe impl Send for ThinCell {}
// SAFETY: as above.
unsafe impl Sync for ThinCell {}

impl ThinCell {
    pub(crate) fn new(cell: CellRef) -> Self {
        Self(CellRef::into_thin(cell))
    }

    /// Runs `f` on the cell as a `CellRef` (to clone it, or to hand it on by
    /// reference) without touching its count.
    pub(crate) fn with<R>(&self, f: impl FnOnce(&CellRef) -> R) -> R {
        // SAFETY: `self` owns a count taken by `into_thin` (so the cell is alive
        // while `self` is borrowed); the reference rebuilt here is never dropped, so
        // that count is not given back twice.
        let cell = ManuallyDrop::new(unsafe { CellRef::from_thin(self.0) });
        f(&cell)
    }

    /// The cell's header, borrowed for as long as `self` is.
    pub(crate) fn header(&self) -> &Header {
        // SAFETY: `self` owns a count of the cell, so the header it points to (at
        // the cell's start, see `CellRef::into_thin`) is alive while `self` is
        // borrowed; it is only ever shared.
        unsafe { self.0.as_ref() }
    }

    pub(crate) fn into_cell(self) -> CellRef {
        let this = ManuallyDrop::new(self);
        // SAFETY: the count `new` took is given back once: `this` is never dropped.
        unsafe { CellRef::from_thin(this.0) }
    }
}

impl Clone for ThinCell {
    fn clone(&self) -> Self {
        Self::new(self.with(CellRef::clone))
    }
}

impl Drop for ThinCell {
    fn drop(&mut self) {
        // SAFETY: gives back the count `new` took, once (`into_cell` skips this).
        drop(unsafe { CellRef::from_thin(self.0) });
    }
}

/// A process travels through a LIFO slot as a pointer to its header.
impl SlotTask for CellRef {
    type Target = Header;

    fn into_raw(self) -> *mut Header {
        CellRef::into_thin(self).as_ptr()
    }

    unsafe fn from_raw(raw: *mut Header) -> Self {
        // SAFETY: forwarded from the caller: `raw` came from `into_raw`, once (so it
        // is not null).
        unsafe { CellRef::from_thin(NonNull::new_unchecked(raw)) }
    }
}
