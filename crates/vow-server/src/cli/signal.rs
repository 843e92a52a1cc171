//! How a client command that runs until stopped learns that the user stopped it.

/// Resolves on Ctrl-C, or SIGTERM on Unix.
pub async fn stopped() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate());
        match term {
            Ok(mut term) => tokio::select! {
                _ = ctrl_c => {},
                _ = term.recv() => {},
            },
            Err(_) => drop(ctrl_c.await),
        }
    }
    #[cfg(not(unix))]
    drop(ctrl_c.await);
}
