//! The Kubernetes manifests, checked offline (no cluster runs here).

use std::path::Path;
use std::process::Command;

use crate::util::run_loud;

/// Where the manifest checkers live, apart from the test clients (their dependencies differ).
const CHECKERS_VENV: &str = "/opt/airlock-ci/manifests";
/// The checkers, pinned: the Kubernetes schemas (bundled, offline), a security linter, and a CEL
/// evaluator for the admission policy.
const CHECKERS: &[&str] = &[
    "kubernetes-validate==1.37.0",
    "checkov==3.3.30",
    "cel-python==0.5.0",
];

/// No Kubernetes cluster runs here, so deploy/kubernetes is checked, not run: every object
/// against the Kubernetes 1.37 schemas (strict: unknown fields fail), the admission policy's CEL
/// against the manifests' own pods and pods that break it (`admission.py`), then checkov's
/// Kubernetes rules (a finding fails unless the manifest skips it with its reason).
pub(super) fn check_manifests(root: &Path) -> anyhow::Result<()> {
    eprintln!("== deploy/kubernetes: schemas, the admission policy and security findings");
    let bin = |name: &str| format!("{CHECKERS_VENV}/bin/{name}");
    if !Path::new(&bin("pip")).exists() {
        run_loud(Command::new("/usr/bin/python3").args(["-m", "venv", CHECKERS_VENV]))?;
    }
    // Pinned, so this is a no-op once they are in (a venv kept from before gains what is new).
    run_loud(
        Command::new(bin("pip"))
            .args(["install", "--quiet", "--disable-pip-version-check"])
            .args(CHECKERS),
    )?;
    let manifests = root.join("deploy/kubernetes/airlock.yaml");
    run_loud(
        Command::new(bin("python"))
            .arg(root.join("xtask/src/cluster/admission.py"))
            .arg(&manifests),
    )?;
    run_loud(
        Command::new(bin("kubernetes-validate"))
            .args(["--strict", "--kubernetes-version", "1.37"])
            .arg(&manifests),
    )?;
    run_loud(
        Command::new(bin("checkov"))
            .args([
                "--framework",
                "kubernetes",
                "--compact",
                "--quiet",
                "--skip-download",
                "-f",
            ])
            .arg(&manifests),
    )
}
