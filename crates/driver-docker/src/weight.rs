//! A warm container's CPU weight against other containers: the lowest while a refill starts its
//! browser beside running tasks, Docker's default once the browser is up or a task waits for it.

use bollard::Docker;
use tokio_util::sync::CancellationToken;

use crate::DockerError;
use airlock_worker::DriverError;

/// A warm container's CPU weight while its browser starts: the lowest Docker takes, so starting
/// the next browser gets only the CPU the running tasks leave (at 128, an eighth of a task's, the
/// refill still slowed back-to-back tasks' page loads more).
pub(crate) const BACKGROUND: i64 = 2;
/// Docker's default CPU weight, which a warm container gets back once its browser is up.
pub(crate) const TASK: i64 = 1024;

/// Set `container`'s CPU weight to `shares`.
pub(crate) async fn set(docker: &Docker, container: &str, shares: i64) -> Result<(), DriverError> {
    let update = bollard::models::ContainerUpdateBody {
        cpu_shares: Some(shares),
        ..Default::default()
    };
    docker
        .update_container(container, update)
        .await
        .map_err(|e| DockerError::UpdateContainer(e).into())
}

/// Run a refill's `steps` (its container at the lowest weight), and give `container` the full
/// weight back once they are done (the browser is up and idle until taken, so the take asks
/// Docker for nothing more) or, at once, when a task takes the refill over and waits for it: at
/// the lowest weight beside other tasks, that task's start would get almost no CPU.
pub(crate) async fn full_when_done_or_taken_over<T>(
    docker: &Docker,
    container: &str,
    taken_over: &CancellationToken,
    steps: impl Future<Output = Result<T, DriverError>>,
) -> Result<T, DriverError> {
    tokio::pin!(steps);
    tokio::select! {
        done = &mut steps => {
            let done = done?;
            set(docker, container, TASK).await?;
            Ok(done)
        }
        () = taken_over.cancelled() => {
            // The steps' work in the container goes on meanwhile; they are polled again after.
            set(docker, container, TASK).await?;
            steps.await
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{Sleeper, docker};

    async fn shares(docker: &Docker, name: &str) -> i64 {
        let info = docker.inspect_container(name, None).await.unwrap();
        info.host_config.unwrap().cpu_shares.unwrap_or(0)
    }

    /// With the real daemon: a refill's container gets the full weight when a task takes the
    /// refill over, while its steps still run, and keeps it when they end.
    #[tokio::test]
    async fn a_refill_taken_over_gets_the_full_weight_before_its_steps_end() {
        if !airlock_testkit::docker::docker_ready() {
            return;
        }
        let docker = docker().await;
        let name = format!("airlock-weight-test-{}", std::process::id());
        let sleeper = Sleeper::start(&docker, &name).await;
        set(&docker, &name, BACKGROUND).await.unwrap();
        let (taken_over, steps_done) = (CancellationToken::new(), CancellationToken::new());
        let steps = async {
            steps_done.cancelled().await;
            Ok::<_, DriverError>("made")
        };
        let script = async {
            assert_eq!(shares(&docker, &name).await, BACKGROUND);
            taken_over.cancel();
            // Bounded: the weight must change while the steps are still waiting.
            let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(30);
            while shares(&docker, &name).await != TASK {
                assert!(tokio::time::Instant::now() < deadline, "never reweighed");
                tokio::task::yield_now().await;
            }
            steps_done.cancel();
        };
        let (made, ()) = tokio::join!(
            full_when_done_or_taken_over(&docker, &name, &taken_over, steps),
            script
        );
        assert_eq!(made.unwrap(), "made");
        assert_eq!(shares(&docker, &name).await, TASK);

        // Not taken over: the full weight comes when the steps end.
        set(&docker, &name, BACKGROUND).await.unwrap();
        let untouched = CancellationToken::new();
        let made = full_when_done_or_taken_over(&docker, &name, &untouched, async {
            Ok::<_, DriverError>(())
        })
        .await;
        made.unwrap();
        assert_eq!(shares(&docker, &name).await, TASK);
        drop(sleeper);
    }
}
