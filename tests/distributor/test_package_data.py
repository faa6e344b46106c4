"""What ships with the package: the bundled default policy and the systemd unit."""

from __future__ import annotations

from importlib import resources

from procsift.distributor import load_policy
from procsift.distributor.policy import DEFAULT_POLICY_NAME


def test_default_policy_and_unit_are_package_data() -> None:
    root = resources.files("procsift.distributor")
    assert root.joinpath(DEFAULT_POLICY_NAME).is_file()
    unit = root.joinpath("procsift.service").read_text()
    assert "ExecStart=" in unit and "procsift restore" in unit and "[Install]" in unit
    assert load_policy().source.endswith(f"{DEFAULT_POLICY_NAME}>")
