"""The policy files jevqueue ships: each checks clean, and says what its comments promise."""

from __future__ import annotations

import functools

import pytest
from jevqueue.policy import Action, Rule, VerdictKind, antigravity_registry
from jevqueue.policy_files import (
    check_policy_file,
    load_policy_rules,
    shipped_policy_names,
    shipped_policy_path,
)

WS = "/workspace/project"
CONTEXT = {
    "task_id": "task-42",
    "actor_id": "coding-agent",
    "workspace": WS,
    "git_sha": "0123456789abcdef0123456789abcdef01234567",
}


@pytest.mark.parametrize("name", shipped_policy_names())
def test_every_shipped_policy_checks_without_mistakes_or_warnings(name: str) -> None:
    report = check_policy_file(shipped_policy_path(name))
    assert report.ok, [str(error) for error in report.errors]
    assert report.warnings == ()


@functools.cache
def _strict_rule() -> Rule:
    (rule,) = load_policy_rules(shipped_policy_path("strict-build-files"))
    return rule


def _strict_verdict(target: str, tool: str = "write_to_file") -> VerdictKind | None:
    rule = _strict_rule()
    arguments = (
        {"TargetFile": target, "CodeContent": "x\n"}
        if tool == "write_to_file"
        else {"AbsolutePath": f"{WS}/{target}"}
    )
    verdict = rule.evaluate(Action.build(antigravity_registry(), tool, arguments, CONTEXT))
    return None if verdict is None else verdict.kind


# Build entry points and tool configuration that run code as soon as someone builds,
# tests, lints or installs; each at the root, in a sub-project and in another case.
BUILD_FILES = [
    ".cargo/config.toml",
    ".cargo/config",
    "Containerfile",
    "Containerfile.prod",
    "configure",
    "configure.ac",
    "Makefile.am",
    "Makefile.in",
    "aclocal.m4",
    "pytest.ini",
    ".bazelrc",
    "MODULE.bazel",
    ".mvn/extensions.xml",
    ".mvn/jvm.config",
    "gradle/wrapper/gradle-wrapper.properties",
    "gradle/libs.versions.toml",
    "gradle.properties",
    "build.sbt",
    "project/build.properties",
    "project/Dependencies.scala",
    "mix.exs",
    "rebar.config",
    "pnpm-workspace.yaml",
    ".pnpmfile.cjs",
    "bunfig.toml",
    "deno.json",
    "Brewfile",
    "Taskfile.yml",
    ".justfile",
    "Tiltfile",
    "Earthfile",
    "build.ninja",
    "SConstruct",
    "CMakePresets.json",
    "vcpkg.json",
    "Cargo.lock",
    "rust-toolchain",
    "Cross.toml",
    "go.work",
    ".goreleaser.yaml",
    "Directory.Build.targets",
    "NuGet.config",
    "lib/Lib.fsproj",
    "Gemfile.lock",
    "tasks/deploy.rake",
    "composer.lock",
    "Makefile.PL",
    "package.yaml",
    "stack.yaml",
    "cabal.project",
    "dune-project",
    "pubspec.yaml",
    "Package.swift",
    "App.xcodeproj/project.pbxproj",
    "docker-compose.override.yaml",
    "docker-bake.hcl",
    "devenv.nix",
    "snapcraft.yaml",
    "app.spec",
    "Pipfile.lock",
    "requirements-dev.in",
    "pdm.lock",
    "pixi.toml",
    ".pdbrc",
    ".coveragerc",
    ".flake8",
    "jest.config.js",
    "webpack.config.cjs",
    "babel.config.json",
    ".prettierrc.mjs",
    "nx.json",
    "turbo.json",
    ".Rprofile",
    "deps/build.jl",
]


@pytest.mark.parametrize("target", BUILD_FILES)
def test_strict_build_files_requires_approval_wherever_the_file_sits(target: str) -> None:
    for spelling in (target, f"services/api/{target}", target.upper()):
        assert _strict_verdict(spelling) is VerdictKind.ALLOW_WITH_OBLIGATIONS, spelling


@pytest.mark.parametrize(
    "target",
    [
        "src/app.py",
        "src/app/app.config.ts",
        "src/configure_logging.py",
        "docs/makefile.md",
        "src/project.py",
        "tests/test_gradle_plugin.py",
        "README.md",
    ],
)
def test_strict_build_files_leaves_source_and_docs_alone(target: str) -> None:
    assert _strict_verdict(target) is None


def test_strict_build_files_governs_writes_not_reads() -> None:
    assert _strict_verdict("Makefile.am", tool="view_file") is None
