//! The settings of the sealed browser itself: the warm pool, the container runtime and the
//! guide the worker reads.

use std::time::Duration;

use airlock_driver_docker::{Guide, PoolConfig};
use airlock_worker::DirectLimits;
use anyhow::bail;

use super::{Resolver, zero_means};
use crate::setting_flags::{FileSettings, SettingFlags};

impl Resolver<'_> {
    /// The container runtime, and the guide the worker reads.
    pub(super) fn runtime_and_guide(
        &mut self,
        flags: &SettingFlags,
        file: &FileSettings,
    ) -> anyhow::Result<(String, Guide)> {
        let runtime = self.pick(
            "runtime",
            "AIRLOCK_RUNTIME",
            flags.runtime.clone(),
            file.runtime.clone(),
            "runc".to_owned(),
            Clone::clone,
        );
        if runtime.is_empty()
            || !runtime
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
        {
            bail!("--runtime `{runtime}` is not a runtime name: use runc, or runsc for gVisor");
        }
        let guide = self.pick(
            "guide",
            "AIRLOCK_GUIDE",
            flags.guide.clone(),
            file.guide.clone(),
            Guide::default().to_string(),
            Clone::clone,
        );
        let guide: Guide = guide
            .parse()
            .map_err(|error| anyhow::anyhow!("--guide: {error}"))?;
        Ok((runtime, guide))
    }

    /// How long one browser command may take.
    pub(super) fn command_timeout(
        &mut self,
        flags: &SettingFlags,
        file: &FileSettings,
    ) -> anyhow::Result<Duration> {
        self.seconds_within(
            ("command_timeout", "AIRLOCK_COMMAND_TIMEOUT"),
            flags.command_timeout,
            file.command_timeout,
            airlock_driver_docker::DEFAULT_COMMAND_TIMEOUT,
            5..=600,
        )
    }

    /// How long a `--direct` session's browser lasts.
    pub(super) fn direct(
        &mut self,
        flags: &SettingFlags,
        file: &FileSettings,
    ) -> anyhow::Result<DirectLimits> {
        let defaults = DirectLimits::default();
        let idle = self.seconds_within(
            ("direct_idle_timeout", "AIRLOCK_DIRECT_IDLE_TIMEOUT"),
            flags.direct_idle_timeout,
            file.direct_idle_timeout,
            defaults.idle,
            10..=86_400,
        )?;
        let lifetime = self.seconds_within(
            ("direct_lifetime", "AIRLOCK_DIRECT_LIFETIME"),
            flags.direct_lifetime,
            file.direct_lifetime,
            defaults.lifetime,
            60..=86_400,
        )?;
        let max_steps = self.pick(
            "direct_max_steps",
            "AIRLOCK_DIRECT_MAX_STEPS",
            flags.direct_max_steps,
            file.direct_max_steps,
            0,
            zero_means("no limit"),
        );
        if max_steps > 1_000_000 {
            bail!(
                "--direct-max-steps {max_steps} is out of range: use 1 to 1000000, or 0 for no limit (AIRLOCK_DIRECT_MAX_STEPS)"
            );
        }
        Ok(DirectLimits {
            idle,
            lifetime,
            max_steps: (max_steps > 0).then_some(max_steps),
        })
    }

    /// The largest viewport a task may ask for.
    pub(super) fn max_viewport(
        &mut self,
        flags: &SettingFlags,
        file: &FileSettings,
    ) -> anyhow::Result<(u32, u32)> {
        let (default_width, default_height) = airlock_policy::DEFAULT_MAX_VIEWPORT;
        let given = self.pick(
            "max_viewport",
            "AIRLOCK_MAX_VIEWPORT",
            flags.max_viewport.clone(),
            file.max_viewport.clone(),
            format!("{default_width}x{default_height}"),
            Clone::clone,
        );
        let (max_width, max_height) = airlock_policy::MAX_VIEWPORT;
        let side = airlock_policy::MIN_VIEWPORT_SIDE;
        given
            .split_once('x')
            .and_then(|(w, h)| Some((w.parse::<u32>().ok()?, h.parse::<u32>().ok()?)))
            .filter(|(w, h)| (side..=max_width).contains(w) && (side..=max_height).contains(h))
            .ok_or_else(|| {
                anyhow::anyhow!(
                    "--max-viewport `{given}` is not a viewport this server can give: write WIDTHxHEIGHT, each side from {side} up to {max_width}x{max_height} (AIRLOCK_MAX_VIEWPORT)"
                )
            })
    }

    pub(super) fn pool(
        &mut self,
        flags: &SettingFlags,
        file: &FileSettings,
        task_timeout: Duration, // with its time for a person: the task's time stands still then
    ) -> anyhow::Result<PoolConfig> {
        let pool_size = self.pick(
            "pool_size",
            "AIRLOCK_POOL_SIZE",
            flags.pool_size,
            file.pool_size,
            0,
            ToString::to_string,
        );
        let pool_max_age = self.seconds_within(
            ("pool_max_age", "AIRLOCK_POOL_MAX_AGE"),
            flags.pool_max_age,
            file.pool_max_age,
            Duration::from_secs(600),
            10..=86_400,
        )?;
        if pool_size > 8 {
            bail!(
                "--pool-size {pool_size} is over 8: each warm browser holds a container's memory; use 0 to 8 (AIRLOCK_POOL_SIZE)"
            );
        }
        // 0: as many as the pool size (a fixed pool).
        let pool_max = self.pick(
            "pool_max",
            "AIRLOCK_POOL_MAX",
            flags.pool_max,
            file.pool_max,
            0,
            |v| match v {
                0 => "the pool size".to_owned(),
                _ => v.to_string(),
            },
        );
        if pool_max > 8 || (pool_max != 0 && pool_max < pool_size) {
            bail!(
                "--pool-max {pool_max} must be from the pool size ({pool_size}) to 8: the pool grows from its size to this while tasks arrive (AIRLOCK_POOL_MAX)"
            );
        }
        Ok(PoolConfig {
            size: pool_size,
            max_size: pool_max,
            max_age: pool_max_age,
            task_timeout,
            // `serve` and `cdp` set the CDP pool from their own flags.
            ..PoolConfig::default()
        })
    }
}
