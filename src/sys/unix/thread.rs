//! Per-thread settings.

/// Asks the kernel to add as little slack as it can to this thread's timer
/// deadlines (a thread that only sleeps until deadlines). Best effort.
pub fn precise_timers() {
    super::os::set_timer_slack_minimal();
}
