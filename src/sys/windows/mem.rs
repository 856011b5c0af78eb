//! The allocator.

/// Returns free heap memory to the OS where the allocator supports it. The
/// Windows heap decommits free pages by itself and has no `malloc_trim`:
/// nothing to do.
pub fn release_free_memory() {}
