//! What every command that runs tasks is built on: the worker's model and the Docker driver,
//! from the settings.

use std::sync::Arc;

use airlock_driver_docker::DockerDriver;
use airlock_models::{BackendOptions, ModelSpec, Thinking};
use airlock_worker::{BrowserDriver, Model};
use anyhow::Context;

use crate::settings::Settings;

/// Build the worker model from the settings.
pub(crate) fn model(settings: &Settings) -> anyhow::Result<Arc<dyn Model>> {
    let spec = settings
        .model
        .as_deref()
        .context("no model: pass --model anthropic/<model>, openai/<model> or script:<file.json> (or set AIRLOCK_MODEL)")?;
    let spec = ModelSpec::parse(spec)?;
    let thinking = settings
        .thinking
        .as_deref()
        .map(Thinking::parse)
        .transpose()?
        .unwrap_or(Thinking::Off);
    let options = BackendOptions {
        base_url: settings.base_url.clone(),
        thinking,
        max_tokens: settings.model_limits.max_answer_tokens,
        request_timeout: settings.model_limits.request_timeout,
        ..BackendOptions::default()
    };
    Ok(airlock_models::build(&spec, options)?)
}

/// Connect the driver and make sure tasks can run.
pub(crate) async fn ready_driver(settings: &Settings) -> anyhow::Result<Arc<DockerDriver>> {
    let driver = DockerDriver::connect(settings.driver.clone()).await?;
    driver.check().await?;
    // A stale image still runs tasks; whoever starts them hears that the browser reading
    // hostile pages lacks security releases.
    if let Ok(age) = driver.image_age().await {
        let now = std::time::SystemTime::now();
        if age.is_stale(now) {
            tracing::warn!("{}", age.describe(now));
        }
    }
    driver.start_pool()?;
    Ok(Arc::new(driver))
}
