use super::{await_reply, Reply};
use std::time::Duration;
use tokio::sync::oneshot;

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

fn reply(text: &str) -> Reply {
    Reply::ToolError(text.to_string())
}

fn text(r: Option<Reply>) -> Option<String> {
    match r {
        Some(Reply::ToolError(t)) => Some(t),
        Some(_) => Some("another reply".into()),
        None => None,
    }
}

#[test]
fn await_reply_sees_replies_within_and_after_the_poll() {
    let rt = rt();
    rt.block_on(async {
        for poll in [Duration::ZERO, Duration::from_micros(200)] {
            // Already there.
            let (tx, rx) = oneshot::channel();
            tx.send(reply("at once")).ok();
            assert_eq!(
                text(await_reply(rx, poll).await).as_deref(),
                Some("at once")
            );
            // Within the poll (sent by another task).
            let (tx, rx) = oneshot::channel();
            tokio::spawn(async move {
                tokio::task::yield_now().await;
                tx.send(reply("soon")).ok();
            });
            assert_eq!(text(await_reply(rx, poll).await).as_deref(), Some("soon"));
            // Long after it: the task sleeps, then wakes for it.
            let (tx, rx) = oneshot::channel();
            tokio::spawn(async move {
                tokio::time::sleep(Duration::from_millis(30)).await;
                tx.send(reply("late")).ok();
            });
            assert_eq!(text(await_reply(rx, poll).await).as_deref(), Some("late"));
        }
    });
}

#[test]
fn await_reply_reports_a_closed_channel_while_polling_and_after() {
    let rt = rt();
    rt.block_on(async {
        // Dropped before: seen by the poll, never awaited again (a spent
        // receiver would panic).
        let (tx, rx) = oneshot::channel::<Reply>();
        drop(tx);
        assert!(await_reply(rx, Duration::from_millis(5)).await.is_none());
        // Dropped after the poll window.
        let (tx, rx) = oneshot::channel::<Reply>();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(20)).await;
            drop(tx);
        });
        assert!(await_reply(rx, Duration::from_micros(100)).await.is_none());
    });
}
