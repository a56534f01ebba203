//! Airlock as a service: MCP (on stdio or streamable HTTP), the `/v1` task API, the guarded CDP
//! endpoint, the dashboard and live pages, admission, the task book and metrics. It knows neither
//! command-line flags nor Docker: browsers come through the [`Browsers`] port, settings as
//! values. The `airlock` binary parses, builds a Docker adapter and serves this.

mod answer_gone;
mod browsers;
pub mod capacity;
pub mod contexts;
pub mod heap;
pub mod kept_run;
pub mod mcp;
mod mcp_answer;
mod mcp_help;
pub mod metric_families;
pub mod metrics;
pub mod record_page;
mod replica;
mod request_refusal;
pub mod scope_request;
pub mod server;
pub mod state_file;
pub mod task_book;
mod task_request;
mod task_settings;

pub use airlock_proxy::EgressEvents;
pub use browsers::{Browsers, CdpLease, PoolClaims, PoolState};
pub use task_settings::TaskSettings;
