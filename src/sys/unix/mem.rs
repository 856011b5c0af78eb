//! The allocator.

/// Returns free heap memory to the OS where the allocator supports it.
pub fn release_free_memory() {
    super::os::malloc_trim();
}
