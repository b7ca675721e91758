//! Acquires, renews and releases a lock against `REDIS_URL` (default
//! `redis://127.0.0.1:6379/`): `cargo run -p lock-core --example smoke`.

use std::time::Duration;

use lock_core::{LockOptions, Locker};

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let url = std::env::var("REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379/".into());
    let locker = Locker::connect(&url).await?;
    let opts = LockOptions::new(Duration::from_millis(300)).wait(Duration::from_secs(2));
    let guard = locker.acquire("smoke", &opts).await?;
    println!("acquired fence {} token {}", guard.fence(), guard.token());
    let second = locker.try_acquire("smoke", &opts).await?;
    println!("second try_acquire while held: {:?}", second.is_some());
    tokio::time::sleep(Duration::from_secs(1)).await;
    println!("held after 1 s (ttl 300 ms): {}", guard.is_held());
    guard.release().await?;
    let again = locker.acquire("smoke", &opts).await?;
    println!("re-acquired with fence {}", again.fence());
    Ok(())
}
