//! The crash-loop breaker: unexpected exits are counted per plugin, enough
//! of them within the window disable it (in memory) with a reason, and a
//! background plugin is otherwise restarted after a growing backoff. Also
//! records the plugin's last error (`PluginHost::last_error`).

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::{calls, lock, Counters, PluginEvent, PluginSlot, Settings, Shared};
use crate::host::LogLevel;
use crate::plugins::process::ExitInfo;

impl PluginSlot {
    /// Records `message` as the plugin's last error (now).
    pub fn set_last_error(&self, message: String) {
        let at = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        *lock(&self.last_error) = Some((message, at));
    }
    /// Records an unexpected exit; returns the reason when the breaker trips now.
    pub(super) fn record_crash(&self, s: &Settings, exit: &ExitInfo) -> Option<String> {
        if s.crash_max == 0 {
            return None;
        }
        let now = Instant::now();
        let mut c = lock(&self.crashes);
        c.push_back(now);
        while c
            .front()
            .is_some_and(|t| now.duration_since(*t) > s.crash_window)
        {
            c.pop_front();
        }
        if c.len() < s.crash_max as usize {
            return None;
        }
        c.clear();
        let window = if s.crash_window < Duration::from_secs(1) {
            format!("{} ms", s.crash_window.as_millis())
        } else {
            format!("{} s", s.crash_window.as_secs())
        };
        let reason = format!(
            "it exited unexpectedly {} times within {window} (last: {exit})",
            s.crash_max
        );
        *lock(&self.breaker) = Some(reason.clone());
        Some(reason)
    }
}

impl Shared {
    /// An unexpected exit of `slot`'s instance: counts it, trips the
    /// breaker when it should, else restarts a background plugin (one
    /// started by `onStartupFinished`) after a backoff.
    pub fn on_crash(self: &Arc<Self>, slot: &Arc<PluginSlot>, exit: &ExitInfo) {
        Counters::bump(&slot.counters.unexpected_exits);
        slot.set_last_error(format!("it exited unexpectedly ({exit})"));
        if let Some(reason) = slot.record_crash(&self.settings, exit) {
            self.log(LogLevel::Warn, || {
                format!("plugin {} disabled: {reason}", slot.id)
            });
            slot.set_last_error(format!("disabled: {reason}"));
            self.emit(PluginEvent::Disabled {
                plugin: slot.id.clone(),
                reason,
            });
            self.views_maybe_changed();
            return;
        }
        let base = self.settings.restart_backoff;
        let background = slot
            .entry()
            .manifest
            .activation_events
            .iter()
            .any(|a| a == "onStartupFinished");
        if base.is_zero() || !background || !self.started_up.load(Ordering::Acquire) {
            return;
        }
        // 1x, 2x, 4x … the base per recent crash, at most a minute.
        let recent = lock(&slot.crashes).len().clamp(1, 7) as u32;
        let delay = (base * (1u32 << (recent - 1))).min(Duration::from_secs(60));
        let shared = Arc::downgrade(self);
        let slot = slot.clone();
        let closing = self.closing.clone();
        self.rt.handle().spawn(async move {
            tokio::select! {
                _ = tokio::time::sleep(delay) => {}
                _ = closing.cancelled() => return,
            }
            let Some(shared) = shared.upgrade() else {
                return;
            };
            // Still installed (not removed by a reload)?
            let current = lock(&shared.plugins).get(&slot.id).cloned();
            if !current.is_some_and(|c| Arc::ptr_eq(&c, &slot)) {
                return;
            }
            if let Err(e) = calls::ensure_instance(&shared, &slot).await {
                shared.log(LogLevel::Warn, || {
                    format!("plugin {}: restart failed: {e}", slot.id)
                });
            }
        });
    }
}
