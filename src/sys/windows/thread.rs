//! Per-thread settings.

/// Asks for precise timer deadlines. Windows has no per-thread timer slack
/// (the timer resolution is process-wide, and changing it would change the
/// host application's): nothing to do.
pub fn precise_timers() {}
