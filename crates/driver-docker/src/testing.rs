//! Helpers for the unit tests that need the real daemon (`cargo xtask integration` runs them as
//! the non-root user; elsewhere the test kit's gate skips them).

/// The local daemon.
pub(crate) async fn docker() -> bollard::Docker {
    bollard::Docker::connect_with_local_defaults()
        .unwrap()
        .negotiate_version()
        .await
        .unwrap()
}

/// A container of the image that only sleeps (no network), removed when dropped, so a failing
/// test leaves nothing.
pub(crate) struct Sleeper {
    name: String,
}

impl Sleeper {
    pub(crate) async fn start(docker: &bollard::Docker, name: &str) -> Self {
        let config = bollard::models::ContainerCreateBody {
            image: Some(airlock_testkit::docker::image()),
            entrypoint: Some(vec!["/bin/sleep".to_owned(), "120".to_owned()]),
            network_disabled: Some(true),
            ..Default::default()
        };
        let options = bollard::query_parameters::CreateContainerOptionsBuilder::default()
            .name(name)
            .build();
        docker
            .create_container(Some(options), config)
            .await
            .unwrap();
        docker.start_container(name, None).await.unwrap();
        Self {
            name: name.to_owned(),
        }
    }
}

impl Drop for Sleeper {
    fn drop(&mut self) {
        let _ = std::process::Command::new("docker")
            .args(["rm", "-f", &self.name])
            .output();
    }
}
