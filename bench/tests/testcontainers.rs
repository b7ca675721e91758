//! The testcontainers route starts Redis and a lock works against it. It
//! needs Docker and the `redis:5.0` image (scripts/redis-image.sh builds it
//! where no registry is reachable); without them it fails and says so.

use std::time::Duration;

use bench::api::{LockOptions, Locker};

#[tokio::test]
async fn a_lock_works_against_the_testcontainers_redis() {
    let redis = bench::redis_container().await.unwrap_or_else(|error| {
        panic!(
            "testcontainers could not start Redis ({error}): start Docker and run \
             scripts/redis-image.sh (scripts/test.sh does both checks)"
        )
    });
    assert_eq!(redis.route, bench::Route::Container);
    let locker = Locker::connect(&redis.url)
        .await
        .expect("connect to the container");
    let opts = LockOptions::new(Duration::from_secs(5));
    let guard = locker.acquire("container", &opts).await.expect("acquire");
    assert!(guard.is_held());
    assert!(
        locker
            .try_acquire("container", &opts)
            .await
            .expect("try")
            .is_none()
    );
    guard.release().await.expect("release");
}
