"""The default rules: what every jevqueue policy enforces unless you add stricter ones.

=================================  =========================================================
rule_id                            verdict
=================================  =========================================================
``jevqueue.workspace.containment``  DENY when a target is not strictly inside the workspace
                                   (the workspace itself and a sibling such as ``/ws-evil``
                                   next to ``/ws`` are outside).
``jevqueue.shell.cwd``             DENY when a tool with a working directory has it outside
                                   the workspace (the workspace itself is fine), or a shell
                                   tool declares no working directory at all.
``jevqueue.shell.approval``        ALLOW_WITH_OBLIGATIONS ``explicit_approval`` for every
                                   ``shell_command`` side effect.
``jevqueue.paths.git``             DENY for writes into ``.git`` (hooks and config there run
                                   code on the next git command; use git itself instead).
``jevqueue.paths.ci``              ALLOW_WITH_OBLIGATIONS ``explicit_approval`` for writes to
                                   files that run without anyone running the project, or
                                   configure what does: the CI definitions of GitHub
                                   (and a repository's own ``action.yml``), GitLab, Gitea,
                                   Forgejo, CircleCI, Azure, Bitbucket, Buildkite, Drone,
                                   Cirrus, Semaphore, Tekton, AWS CodeBuild, Jenkins,
                                   TeamCity, Harness, Bitrise (and Travis, AppVeyor,
                                   Woodpecker, Cloud Build, Codefresh); deploy hooks and
                                   build commands (Netlify, Vercel, Render, Amplify,
                                   CodeDeploy, Elastic Beanstalk, ``Procfile``); git hooks
                                   wherever git can be pointed (``.githooks/``,
                                   ``.gitmodules``, ``.gitattributes``); husky, lefthook,
                                   pre-commit, overcommit, simple-git-hooks and the
                                   lint-staged and commitlint they run;
                                   ``site-packages/*.pth``, ``sitecustomize.py``,
                                   ``usercustomize.py``; ``.envrc`` and mise; dev
                                   containers, Gitpod, Replit; editors' tasks and local
                                   config (``.vscode/``, ``.idea/``, ``.zed/``, ``.vs/``,
                                   ``.helix/``, ``.exrc``, ``.nvim.lua``,
                                   ``.dir-locals.el``, ``*.code-workspace``); coding
                                   agents' hooks and MCP servers (``.claude/``,
                                   ``.cursor/``, ``.gemini/``, ``.codex/``, ``.mcp.json``
                                   ...).
``jevqueue.paths.secrets``         ALLOW_WITH_OBLIGATIONS ``explicit_approval`` for reading
                                   or writing secret stores (``.env*`` except templates such
                                   as ``.env.example``, ``*.pem``, ``*.key``, keystores,
                                   ``id_rsa``, ``secrets.yaml`` and its kin, Rails'
                                   ``*.yml.enc``, ``*.tfvars``, ``*.tfstate``,
                                   ``.vault-token``, Ansible vault files, cloud credential
                                   and service-account files, ``.htpasswd``, ``.netrc``,
                                   ``.pgpass``, ``.my.cnf``, kubeconfig, ``.ssh/``,
                                   ``.aws/``, ``.config/gcloud/`` ...).
``jevqueue.content.credentials``   DENY when the tool's content carries a credential (cloud
                                   keys, private key blocks, common API token formats).
``jevqueue.paths.spelling``        DENY a path or working directory spelt so that tools
                                   disagree on the file: backslashes, ``%xx``, control
                                   characters, trailing dots or spaces, drive letters,
                                   ``$VAR``, ``~user`` (opt out: ``literal_paths=True``).
``jevqueue.paths.hardlink``        ALLOW_WITH_OBLIGATIONS ``explicit_approval`` for writing an
                                   existing file with more than one hard link.
``jevqueue.paths.missing``         DENY a call of a file tool that names no file at all.
``jevqueue.delete.approval``       ALLOW_WITH_OBLIGATIONS ``explicit_approval`` for every
                                   ``file_delete`` or ``data_delete`` (a policy file may
                                   relax it: ``[policy] relax``).
``jevqueue.paths.normalize``       REPAIR a path argument written with ``..`` segments or a
                                   leading ``~`` into its resolved form, so the path an
                                   approver reads is the path the tool will touch.
=================================  =========================================================

Why approval and not denial for CI and secrets: editing a workflow or a ``.env`` file is
sometimes exactly the task, and a person can judge it; writing into ``.git`` never is.
Path components are compared case-insensitively, because common filesystems (macOS,
Windows) treat ``.GIT/hooks`` and ``.git/hooks`` as the same directory.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from jevqueue.policy._action import Action
from jevqueue.policy._registry import DATA_DELETE, FILE_DELETE, FILE_READ, FILE_WRITE, SHELL_COMMAND
from jevqueue.policy._rule import Rule
from jevqueue.policy._verdict import Verdict

__all__ = [
    "EXPLICIT_APPROVAL",
    "RELAXABLE_RULES",
    "CIConfigRule",
    "CredentialContentRule",
    "DeleteApprovalRule",
    "GitInternalsRule",
    "HardLinkRule",
    "MissingTargetRule",
    "PathNormalizationRule",
    "PathSpellingRule",
    "SecretFileRule",
    "ShellApprovalRule",
    "ShellWorkingDirectoryRule",
    "WorkspaceContainmentRule",
    "default_rules",
]

EXPLICIT_APPROVAL = "explicit_approval"
"""The obligation a person's signed approval of the exact action digest fulfils."""

_WRITES = frozenset({FILE_WRITE, FILE_DELETE})
_FILE_EFFECTS = frozenset({FILE_READ, FILE_WRITE, FILE_DELETE})


class WorkspaceContainmentRule:
    """DENY when any target is not strictly inside the workspace."""

    rule_id = "jevqueue.workspace.containment"

    def __init__(self) -> None:
        self._verdicts: dict[tuple[str, ...], Verdict] = {}

    def evaluate(self, action: Action) -> Verdict | None:
        """Check every resolved target against the workspace."""
        relative = action.relative_targets
        if None not in relative:
            return None
        fields = action.target_fields
        outside: tuple[str, ...]
        if len(relative) == 1 and len(fields) == 1:
            outside = fields  # the one target is the one outside
        else:
            outside = tuple(
                field for field, parts in zip(fields, relative, strict=True) if parts is None
            )
        verdict = self._verdicts.get(outside)
        if verdict is None:
            verdict = Verdict.deny(
                *(
                    f"{field} resolves outside the workspace (after ~, '..', symbolic links "
                    "and absolute paths are resolved): keep every path strictly inside the "
                    "workspace"
                    for field in outside
                ),
                rule_ids=(self.rule_id,),
            )
            if len(self._verdicts) < 256:  # field names come from the registry: few
                self._verdicts[outside] = verdict
        return verdict


class ShellWorkingDirectoryRule:
    """DENY a working directory outside the workspace, or a shell tool without one."""

    rule_id = "jevqueue.shell.cwd"

    def evaluate(self, action: Action) -> Verdict | None:
        """Check the resolved working directory."""
        spec = action.spec
        cwd_field = spec.cwd_field if spec is not None else None
        if cwd_field is None:
            if SHELL_COMMAND in action.side_effects:
                return Verdict.deny(
                    "a shell command needs a working directory inside the workspace, and this "
                    "tool declares no cwd_field: register it with one",
                    rule_ids=(self.rule_id,),
                )
            return None
        cwd = action.cwd
        if cwd is None:
            if SHELL_COMMAND in action.side_effects:
                return Verdict.deny(
                    f"{cwd_field} (the working directory) is missing: pass a directory "
                    "inside the workspace",
                    rule_ids=(self.rule_id,),
                )
            return None
        root = action.workspace_root
        if cwd == root or (root != "/" and cwd.startswith(root + "/")):
            return None
        return Verdict.deny(
            f"{cwd_field} (the working directory) resolves outside the workspace: run "
            "commands from the workspace or a directory inside it",
            rule_ids=(self.rule_id,),
        )


class ShellApprovalRule:
    """ALLOW_WITH_OBLIGATIONS ``explicit_approval`` for shell commands."""

    rule_id = "jevqueue.shell.approval"
    opinion_side_effects = frozenset({SHELL_COMMAND})

    def evaluate(self, action: Action) -> Verdict | None:
        """Require an approval bound to the digest for every ``shell_command``."""
        if SHELL_COMMAND not in action.side_effects:
            return None
        return self._verdict

    def __init__(self) -> None:
        self._verdict = Verdict.allow_with_obligations(
            (EXPLICIT_APPROVAL,),
            "a shell command runs with the agent's full authority: it needs an explicit "
            "approval of this exact action digest",
            rule_ids=(self.rule_id,),
        )


class GitInternalsRule:
    """DENY writes into ``.git``."""

    rule_id = "jevqueue.paths.git"
    opinion_side_effects = _WRITES

    def evaluate(self, action: Action) -> Verdict | None:
        """Look for a ``.git`` component in every written target."""
        if action.side_effects.isdisjoint(_WRITES):
            return None
        hits: list[str] | None = None
        for field, parts in action.folded_targets:
            if ".git" in parts:
                if hits is None:
                    hits = [field]
                else:
                    hits.append(field)
        if hits is None:
            return None
        return Verdict.deny(
            *(
                f"{field} is inside .git, where hooks and config run code on the next git "
                "command: change the repository with git itself, never by writing into .git"
                for field in hits
            ),
            rule_ids=(self.rule_id,),
        )


# Directories whose files run later without anyone running the project, or configure
# what does: hooks, hook managers, CI systems, dev containers, editors' tasks on open.
_CI_DIRECTORIES = frozenset(
    {
        ".circleci",  # CircleCI
        ".buildkite",  # Buildkite
        ".semaphore",  # Semaphore
        ".tekton",  # Tekton
        ".azure-pipelines",  # Azure Pipelines
        ".gitlab",  # GitLab (CI templates and includes)
        ".woodpecker",  # Woodpecker
        ".husky",  # husky git hooks
        ".githooks",  # the usual core.hooksPath
        ".lefthook",  # lefthook scripts
        ".devcontainer",  # dev containers (postCreateCommand runs on open)
        ".vscode",  # tasks.json runOn folderOpen, settings that name executables
        ".idea",  # JetBrains run configurations and startup tasks
        ".zed",  # Zed tasks
        ".fleet",  # Fleet run configurations
        ".theia",  # Theia tasks
        ".vs",  # Visual Studio tasks.vs.json and launch.vs.json
        ".helix",  # Helix languages.toml names the language servers it starts on open
        ".teamcity",  # TeamCity Kotlin DSL settings
        ".harness",  # Harness pipelines
        ".ebextensions",  # Elastic Beanstalk commands, run on every deploy
        ".platform",  # Elastic Beanstalk platform hooks
        ".mise",  # mise configuration and tasks (hooks run on cd)
        # Coding agents' project settings: hooks and MCP servers they start by themselves.
        ".claude",
        ".cursor",
        ".gemini",
        ".codex",
        ".kiro",
        ".windsurf",
        ".continue",
        ".roo",
        ".amazonq",
        ".opencode",
    }
)
# Directory pairs: CI definitions of forges that share the layout.
_CI_PAIRS = frozenset(
    {
        (".github", "workflows"),
        (".github", "actions"),
        (".gitea", "workflows"),
        (".gitea", "actions"),
        (".forgejo", "workflows"),
        (".forgejo", "actions"),
        (".config", "mise"),
    }
)
_CI_FILES = frozenset(
    {
        ".gitlab-ci.yml",
        ".gitlab-ci.yaml",
        ".travis.yml",
        ".drone.yml",
        ".drone.yaml",
        ".drone.star",
        "jenkinsfile",
        "azure-pipelines.yml",
        "azure-pipelines.yaml",
        "bitbucket-pipelines.yml",
        "bitbucket-pipelines.yaml",
        ".appveyor.yml",
        "appveyor.yml",
        ".woodpecker.yml",
        ".woodpecker.yaml",
        ".cirrus.yml",
        ".cirrus.yaml",
        ".cirrus.star",
        "buildspec.yml",  # AWS CodeBuild
        "buildspec.yaml",
        "cloudbuild.yaml",
        "cloudbuild.yml",
        "codemagic.yaml",
        "bitrise.yml",
        "codefresh.yml",
        "action.yml",  # a repository's own GitHub Action runs in its users' CI
        "action.yaml",
        ".gitpod.yml",  # Gitpod tasks run when a workspace opens
        ".gitpod.dockerfile",
        ".replit",  # Replit's run and on-boot commands
        "replit.nix",
        # Build and release commands a push deploys with.
        "netlify.toml",
        "vercel.json",
        "render.yaml",
        "amplify.yml",
        "appspec.yml",  # AWS CodeDeploy hooks
        "appspec.yaml",
        ".platform.app.yaml",
        "procfile",  # Heroku's release phase
        ".pre-commit-config.yaml",
        ".pre-commit-config.yml",
        ".pre-commit-hooks.yaml",
        "lefthook.yml",
        "lefthook.yaml",
        ".lefthook.yml",
        ".lefthook.yaml",
        "lefthook-local.yml",
        ".lefthook-local.yml",
        ".huskyrc",
        ".huskyrc.json",
        ".huskyrc.js",
        ".overcommit.yml",
        ".simple-git-hooks.json",
        ".simple-git-hooks.js",
        ".simple-git-hooks.cjs",
        "simple-git-hooks.json",
        "simple-git-hooks.js",
        "simple-git-hooks.cjs",
        ".gitmodules",  # submodule URLs and update = !command
        ".gitattributes",  # filter and diff drivers run configured commands
        ".envrc",  # direnv runs it on cd
        "mise.toml",  # mise runs its hooks and env scripts on cd
        ".mise.toml",
        "mise.local.toml",
        ".mise.local.toml",
        ".rtx.toml",
        ".rtx.local.toml",
        # Editors run these when a folder opens.
        ".exrc",
        ".nvimrc",
        ".nvim.lua",
        ".lvimrc",
        ".dir-locals.el",
        ".dir-locals-2.el",
        # Coding agents start these MCP servers and commands by themselves.
        ".mcp.json",
        "opencode.json",
        "opencode.jsonc",
        ".aider.conf.yml",
        ".devcontainer.json",
        "sitecustomize.py",  # imported by every Python start-up
        "usercustomize.py",
    }
)
# Names by their start or end: Jenkinsfile.release; lint-staged and commitlint, which the
# commit hooks run, in any of their config formats; editor workspaces with tasks.
_CI_PREFIXES = (
    "jenkinsfile",
    ".lintstagedrc",
    "lint-staged.config.",
    ".commitlintrc",
    "commitlint.config.",
)
_CI_SUFFIXES = (".code-workspace", ".sublime-project")


# Whether folded path components name CI configuration or a secret store: pure functions
# of the components, remembered for the paths an agent touches again and again.
_CI_PATHS: dict[tuple[str, ...], bool] = {}
_SECRET_PATHS: dict[tuple[str, ...], bool] = {}
_PATHS_LIMIT = 4096


_PATH_KEY_LIMIT = 1024  # characters: longer paths are judged afresh each time


def _remember(memo: dict[tuple[str, ...], bool], parts: tuple[str, ...], answer: bool) -> bool:
    if sum(map(len, parts)) <= _PATH_KEY_LIMIT:
        if len(memo) >= _PATHS_LIMIT:
            memo.clear()
        memo[parts] = answer
    return answer


def _fields_where(
    action: Action,
    predicate: Callable[[tuple[str, ...]], bool],
    memo: dict[tuple[str, ...], bool],
) -> list[str] | None:
    """The target fields whose folded path satisfies ``predicate`` (memoised), or ``None``."""
    hits: list[str] | None = None
    for field, parts in action.folded_targets:
        if type(parts) is tuple:
            hit = memo.get(parts)
            if hit is None:
                hit = _remember(memo, parts, predicate(parts))
        else:
            hit = predicate(parts)
        if hit:
            if hits is None:
                hits = [field]
            else:
                hits.append(field)
    return hits


def _is_ci(parts: tuple[str, ...]) -> bool:
    name = parts[-1]
    if name in _CI_FILES or name.startswith(_CI_PREFIXES) or name.endswith(_CI_SUFFIXES):
        return True
    if name.endswith(".pth") and any(
        part in ("site-packages", "dist-packages") for part in parts[:-1]
    ):
        return True  # a .pth file's import lines run at every Python start-up
    if len(parts) == 1:
        return False
    directories = parts[:-1]
    if not _CI_DIRECTORIES.isdisjoint(directories):
        return True
    for index in range(len(directories) - 1):
        if (directories[index], directories[index + 1]) in _CI_PAIRS:
            return True
    return False


class CIConfigRule:
    """Require explicit approval for writes to CI and automation config."""

    rule_id = "jevqueue.paths.ci"
    opinion_side_effects = _WRITES

    def evaluate(self, action: Action) -> Verdict | None:
        """Match every written target against the CI and automation locations."""
        if action.side_effects.isdisjoint(_WRITES):
            return None
        hits = _fields_where(action, _is_ci, _CI_PATHS)
        if hits is None:
            return None
        return Verdict.allow_with_obligations(
            (EXPLICIT_APPROVAL,),
            *(
                f"{field} is CI or automation configuration, whose code runs later with other "
                "credentials: it needs an explicit approval"
                for field in hits
            ),
            rule_ids=(self.rule_id,),
        )


_SECRET_DIRECTORIES = frozenset(
    {
        ".ssh",
        ".aws",
        ".gnupg",
        ".kube",
        ".docker",
        ".azure",
        ".oci",  # Oracle Cloud
        ".kaggle",
        ".snowsql",
        ".terraform.d",  # credentials.tfrc.json
        ".password-store",  # pass
        ".secrets",
    }
)
# Tool folders under .config that hold tokens: gcloud, the GitHub CLI and hub, 1Password's
# CLI, DigitalOcean's doctl, SOPS age keys, and configstore (firebase-tools and others).
_SECRET_CONFIG_FOLDERS = frozenset({"gcloud", "gh", "hub", "op", "doctl", "sops", "configstore"})
# A file of this name in a folder of this name: remote URLs in .git/config often carry
# tokens; Maven's and Gradle's user settings hold repository passwords and signing keys;
# Composer's and container registries' auth.json hold tokens (elsewhere an auth.json is
# as likely a translation file).
_SECRET_FILES_IN = frozenset(
    {
        (".git", "config"),
        (".m2", "settings.xml"),
        (".gradle", "gradle.properties"),
        (".composer", "auth.json"),
        ("composer", "auth.json"),
        ("containers", "auth.json"),
    }
)
_SECRET_NAME = re.compile(
    r"\.env(?!\.(?:example|sample|template|dist|defaults)$).*"
    r"|(?:id_rsa|id_dsa|id_ecdsa|id_ed25519)(?!.*\.pub$).*"
    r"|.*\.(?:pem|key|p12|pfx|jks|jceks|keystore|ppk|tfstate|tfstate\.backup|tfvars|tfvars\.json"
    r"|pkcs12|p8|kdbx|keychain|keychain-db|gpg|keytab|ovpn|ya?ml\.enc)"
    # secrets.yaml, secrets.prod.yml, secrets.enc.json, secret.toml (helm-secrets, SOPS,
    # Streamlit, Kubernetes manifests); not secrets.py or secrets_test.go, which are code.
    r"|secrets?(?:\.[a-z0-9_-]+)*\.(?:ya?ml|json|toml|ini|env|conf|cfg|properties|xml|txt|enc)"
    r"|credentials(?:\.(?:json|toml|ya?ml|ini|xml|tfrc\.json))?"
    r"|client_secrets?.*\.json|.*service[-_]?account.*\.json|serviceaccountkey\.json"
    r"|\.netrc|_netrc|\.npmrc|\.pypirc|\.git-credentials|\.pgpass|pgpass\.conf|\.htpasswd"
    r"|\.vault-token|\.vault_pass(?:\.txt)?|\.vault-password|vault\.ya?ml|\.secrets"
    r"|\.s3cfg|\.boto|\.dockercfg|kubeconfig|.*\.kubeconfig|\.terraformrc"
    r"|terraform\.rc|\.my\.cnf|\.mylogin\.cnf|\.passwd-s3fs|\.databrickscfg|rclone\.conf"
    r"|settings-security\.xml|wp-config\.php|application_default_credentials\.json",
    re.DOTALL,
)


# What a name must start or end with, or be, or hold, for _SECRET_NAME to match it at all.
_SECRET_STARTS = (".env", "id_", "secret", "credentials", "client_secret", ".vault_pass")
_SECRET_ENDS = (
    ".pem",
    ".key",
    ".p12",
    ".pfx",
    ".jks",
    ".jceks",
    ".keystore",
    ".ppk",
    ".tfstate",
    ".tfstate.backup",
    ".tfvars",
    ".tfvars.json",
    ".pkcs12",
    ".p8",
    ".kdbx",
    ".keychain",
    ".keychain-db",
    ".gpg",
    ".keytab",
    ".ovpn",
    ".yml.enc",
    ".yaml.enc",
    ".kubeconfig",
)
_SECRET_NAMES = frozenset(
    {
        ".netrc",
        "_netrc",
        ".npmrc",
        ".pypirc",
        ".git-credentials",
        ".pgpass",
        "pgpass.conf",
        ".htpasswd",
        ".vault-token",
        ".vault-password",
        "vault.yml",
        "vault.yaml",
        ".secrets",
        ".s3cfg",
        ".boto",
        ".dockercfg",
        "kubeconfig",
        ".terraformrc",
        "terraform.rc",
        ".my.cnf",
        ".mylogin.cnf",
        ".passwd-s3fs",
        ".databrickscfg",
        "rclone.conf",
        "settings-security.xml",
        "wp-config.php",
        "serviceaccountkey.json",
        "application_default_credentials.json",
    }
)
_SECRET_HOLDS = "account"  # service-account.json, my-project-service_account-key.json


def _is_secret(parts: tuple[str, ...]) -> bool:
    name = parts[-1]
    if (
        name.startswith(_SECRET_STARTS)
        or name.endswith(_SECRET_ENDS)
        or name in _SECRET_NAMES
        or _SECRET_HOLDS in name
    ) and _SECRET_NAME.fullmatch(name):
        return True
    if len(parts) >= 2 and (parts[-2], name) in _SECRET_FILES_IN:
        return True
    if len(parts) > 1 and not _SECRET_DIRECTORIES.isdisjoint(parts[:-1]):
        return True
    for index in range(len(parts) - 2):
        if parts[index] == ".config" and parts[index + 1] in _SECRET_CONFIG_FOLDERS:
            return True
    return False


class SecretFileRule:
    """Require explicit approval for reading or writing secret stores."""

    rule_id = "jevqueue.paths.secrets"

    def evaluate(self, action: Action) -> Verdict | None:
        """Match every target against the secret-store names."""
        hits = _fields_where(action, _is_secret, _SECRET_PATHS)
        if hits is None:
            return None
        return Verdict.allow_with_obligations(
            (EXPLICIT_APPROVAL,),
            *(
                f"{field} is a secret store (environment file, key or credentials): touching "
                "it needs an explicit approval"
                for field in hits
            ),
            rule_ids=(self.rule_id,),
        )


# Each pattern starts with a literal, so a separate search is a fast literal scan; a
# leading word boundary is left out because it defeats that scan (matching inside a longer
# token only errs on the side of denying). Repetitions before a literal suffix are
# bounded, so no input backtracks quadratically.
_CREDENTIALS: tuple[tuple[str, str], ...] = (
    ("aws_access_key", r"(?:AKIA|ASIA|ABIA|ACCA|AGPA|AIDA|AROA|ANPA|ANVA|AIPA)[A-Z2-7]{16}\b"),
    (
        "aws_secret_key",
        r"(?i:aws_?secret_?(?:access_?)?key)[\"']?\s{0,8}[:=]\s{0,8}[\"']?[A-Za-z0-9/+]{40}\b",
    ),
    ("private_key", r"-----BEGIN (?:[A-Z0-9]{1,20} ){0,4}PRIVATE KEY(?: BLOCK)?-----"),
    ("github_token", r"(?:gh[pousr]_[A-Za-z0-9]{36,255}|github_pat_[A-Za-z0-9_]{40,255})\b"),
    ("gitlab_token", r"glpat-[A-Za-z0-9_\-]{20}"),
    ("slack_token", r"xox[abposr]-[A-Za-z0-9-]{10}"),
    ("slack_webhook", r"https://hooks\.slack\.com/services/T[A-Za-z0-9_/]{20}"),
    ("google_api_key", r"AIza[0-9A-Za-z_\-]{35}"),
    ("stripe_key", r"[rs]k_live_[0-9A-Za-z]{20}"),
    ("openai_key", r"sk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_\-]{20,200}T3BlbkFJ"),
    ("anthropic_key", r"sk-ant-(?:api|admin)\d{2}-[A-Za-z0-9_\-]{80}"),
    ("npm_token", r"npm_[A-Za-z0-9]{36}\b"),
    ("pypi_token", r"pypi-AgEIcHlwaS5vcmc[A-Za-z0-9_\-]{50}"),
    ("huggingface_token", r"hf_[A-Za-z]{34}\b"),
)
_CREDENTIAL_PATTERN = re.compile("|".join(f"(?P<{name}>{rx})" for name, rx in _CREDENTIALS))
# Substrings a match cannot lack: a pattern is searched only when the text holds, for each
# group, at least one of its substrings. aws_secret_key's name is case-insensitive, so its
# gate is the "w" of "aws" and the separator, and "ecret" in the lower-cased text (no
# character but "W", "E", "C", "R" and "T" themselves matches these letters ignoring case).
_REQUIRED: dict[str, tuple[tuple[str, ...], ...]] = {
    "aws_access_key": (("A",),),
    "aws_secret_key": (("w", "W"), (":", "=")),
    "private_key": (("-----BEGIN ",),),
    "github_token": (("gh", "github_pat_"),),
    "gitlab_token": (("glpat-",),),
    "slack_token": (("xox",),),
    "slack_webhook": (("https://hooks.slack.com/services/T",),),
    "google_api_key": (("AIza",),),
    "stripe_key": (("k_live_",),),
    "openai_key": (("T3BlbkFJ",),),
    "anthropic_key": (("sk-ant-",),),
    "npm_token": (("npm_",),),
    "pypi_token": (("pypi-AgEIcHlwaS5vcmc",),),
    "huggingface_token": (("hf_",),),
}
_SEPARATE_PATTERNS = tuple((name, re.compile(rx)) for name, rx in _CREDENTIALS)
_LOWERED_REQUIRED = {"aws_secret_key": "ecret"}
_GATED_PATTERNS = tuple(
    (name, pattern, _REQUIRED[name], _LOWERED_REQUIRED.get(name))
    for name, pattern in _SEPARATE_PATTERNS
)
# Every pattern needs one of these characters (an "A" of the AWS and Google prefixes, the
# "w" of "aws", the "-" or "_" of the other prefixes, the "x" of "xox", the "T" of the
# Slack webhook and OpenAI keys): a text without any cannot carry a credential.
_CANDIDATE = re.compile(r"[AWTwx_\-]")
_SHORT = 512  # below this length the first match in the text decides the kind


def _shortest_match(patterns: Iterable[str]) -> int:
    """The fewest characters any of ``patterns`` can match (0 when that is unknown)."""
    try:
        from re import _parser  # type: ignore[attr-defined]

        return min(int(_parser.parse(rx).getwidth()[0]) for rx in patterns)
    except Exception:  # pragma: no cover - another regular-expression engine
        return 0


# A text shorter than every credential format carries none: no search is needed.
_SHORTEST = _shortest_match(rx for _, rx in _CREDENTIALS)
_TINY = 16  # below this length one combined search is the cheapest way to find it


def _may_match(text: str, required: tuple[tuple[str, ...], ...], lowered: str | None) -> bool:
    for group in required:
        for literal in group:
            if literal in text:
                break
        else:
            return False
    return lowered is None or lowered in text.lower()


def _credential(text: str) -> str | None:
    """Return the kind of the first credential format found in ``text``, if any.

    Below ``_SHORT`` characters, "first" is the leftmost match (the earlier pattern on a
    tie), exactly what one search with the combined pattern finds; longer texts are
    searched pattern by pattern and the first pattern that matches decides.
    """
    if len(text) < _TINY:
        if len(text) < _SHORTEST:
            return None
        match = _CREDENTIAL_PATTERN.search(text)
        return None if match is None else match.lastgroup
    if _CANDIDATE.search(text) is None:
        return None
    if len(text) >= _SHORT:
        for name, pattern, required, lowered in _GATED_PATTERNS:
            if _may_match(text, required, lowered) and pattern.search(text) is not None:
                return name
        return None
    found: str | None = None
    leftmost = len(text) + 1
    for name, pattern, required, lowered in _GATED_PATTERNS:
        if not _may_match(text, required, lowered):
            continue
        match = pattern.search(text)
        if match is not None and match.start() < leftmost:
            leftmost = match.start()
            found = name
    return found


_LABELS = {
    "aws_access_key": "an AWS access key id",
    "aws_secret_key": "an AWS secret access key",
    "private_key": "a private key block",
    "github_token": "a GitHub token",
    "gitlab_token": "a GitLab token",
    "slack_token": "a Slack token",
    "slack_webhook": "a Slack webhook URL",
    "google_api_key": "a Google API key",
    "stripe_key": "a Stripe live key",
    "openai_key": "an OpenAI API key",
    "anthropic_key": "an Anthropic API key",
    "npm_token": "an npm token",
    "pypi_token": "a PyPI token",
    "huggingface_token": "a Hugging Face token",
}


def _strings(value: Any) -> Iterator[str]:
    stack = [value]
    while stack:
        item = stack.pop()
        kind = type(item)
        if kind is str:
            yield item
        elif kind is dict:
            stack.extend(item.values())
            stack.extend(item.keys())
        elif kind is list:
            stack.extend(item)


def _content(arguments: Any, pointer: tuple[str, ...]) -> Iterator[str]:
    """Yield every string under ``pointer`` (``*`` = every child).

    A string met before the pointer ends is yielded whole: content sent as a JSON-encoded
    string instead of a list is still scanned.
    """
    frontier = [arguments]
    for segment in pointer:
        following: list[Any] = []
        for node in frontier:
            kind = type(node)
            if kind is str:
                yield node
            elif kind is dict:
                if segment == "*":
                    following.extend(node.values())
                elif segment in node:
                    following.append(node[segment])
            elif kind is list and segment == "*":
                following.extend(node)
        frontier = following
    for node in frontier:
        yield from _strings(node)


class CredentialContentRule:
    """DENY content that carries credentials.

    Scans the tool's declared ``content_fields`` (every string in the arguments when it
    declares none). The reason names the kind of credential and the field, never the value.
    """

    rule_id = "jevqueue.content.credentials"

    def __init__(self) -> None:
        self._pointers: dict[tuple[str, ...], tuple[tuple[str, tuple[str, ...]], ...]] = {}

    def _fields(self, content_fields: tuple[str, ...]) -> tuple[tuple[str, tuple[str, ...]], ...]:
        pointers = self._pointers.get(content_fields)
        if pointers is None:
            pointers = tuple((field, tuple(field.split("/"))) for field in content_fields)
            self._pointers[content_fields] = pointers
        return pointers

    def evaluate(self, action: Action) -> Verdict | None:
        """Search the content for credential formats."""
        spec = action.spec
        content_fields = spec.content_fields if spec is not None else ()
        found: dict[str, str] = {}
        arguments = action.arguments
        if content_fields:
            pointers = self._pointers.get(content_fields)
            if pointers is None:
                pointers = self._fields(content_fields)
            for field, pointer in pointers:
                texts: Iterable[str]
                if len(pointer) == 1:
                    value = arguments.get(pointer[0])
                    if value is None:
                        continue
                    if type(value) is str:
                        if len(value) < _SHORTEST:
                            continue  # too short to hold any credential format
                        texts = (value,)
                    else:
                        texts = _strings(value)
                else:
                    texts = _content(arguments, pointer)
                for text in texts:
                    kind = _credential(text)
                    if kind is not None:
                        found.setdefault(kind, field.split("/")[0])
        else:
            for text in _strings(arguments):
                kind = _credential(text)
                if kind is not None:
                    found.setdefault(kind, "the arguments")
        if not found:
            return None
        return Verdict.deny(
            *(
                f"{field} carries {_LABELS[kind]}: never pass credentials through a tool "
                "call; reference them from a secret store the tool reads itself"
                for kind, field in found.items()
            ),
            rule_ids=(self.rule_id,),
        )


class PathNormalizationRule:
    """REPAIR paths written with ``..`` segments or a leading ``~``.

    The repaired proposal holds each such path in its resolved form — workspace-relative
    when the agent wrote a relative or ``~`` path (absolute for ``~`` so the tool still
    gets a full path), under the context's workspace when it wrote an absolute one — so
    the path an approver reads is the path the tool touches. Only paths that resolve
    inside the workspace are repaired; the rest are denied by the containment rules.
    """

    rule_id = "jevqueue.paths.normalize"

    def evaluate(self, action: Action) -> Verdict | None:
        """Repair every indirect path whose target lies inside the workspace."""
        spec = action.spec
        if spec is None:
            return None
        arguments = action.arguments
        root = action.workspace_root
        workspace = action.context.workspace
        if None in action.relative_targets:
            return None  # outside: the containment rule denies it
        cwd_field = spec.cwd_field
        for field in action.target_fields:
            raw = arguments.get(field)
            if type(raw) is str and (".." in raw or raw[:1] == "~"):
                break
        else:
            if cwd_field is None:
                return None
            raw = arguments.get(cwd_field)
            if type(raw) is not str or (".." not in raw and raw[:1] != "~"):
                return None
        fixes: dict[str, str] = {}
        pairs: list[tuple[str, str]] = [
            (field, target)
            for field, target in zip(action.target_fields, action.targets, strict=True)
            if _maybe_indirect(arguments.get(field))
        ]
        cwd = action.cwd
        if cwd_field is not None and cwd is not None and _maybe_indirect(arguments.get(cwd_field)):
            pairs.append((cwd_field, cwd))
        for field, target in pairs:
            raw = arguments[field]
            if not _indirect(raw):
                continue
            if target == root:
                relative = "."
            elif root != "/" and target.startswith(root + "/"):
                relative = target[len(root) + 1 :]
            else:
                return None  # outside: the containment rules deny it
            if raw.startswith(("/", "~")):
                fixed = workspace if relative == "." else workspace + "/" + relative
            else:
                fixed = relative
            if fixed != raw:
                fixes[field] = fixed
        if not fixes:
            return None
        repaired = dict(arguments)
        repaired.update(fixes)
        return Verdict.repair(
            action.tool,
            repaired,
            *(
                f"{field} is written indirectly ('..' segments or '~'): resubmit the repaired "
                "proposal, which names the resolved path inside the workspace"
                for field in fixes
            ),
            rule_ids=(self.rule_id,),
        )


# Spellings that name different files to different tools: a shell expands ``$HOME`` and
# ``~root``, a URL layer decodes ``%2e``, Windows reads ``\``, ``C:`` and drops trailing
# dots and spaces; control characters hide from the person reading the approval.
_ODD_SPELLINGS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("a backslash", re.compile(r"\\")),
    ("percent-encoding", re.compile(r"%[0-9A-Fa-f]{2}")),
    ("a control character", re.compile(r"[\x00-\x1f\x7f-\x9f]")),
    (
        "a component ending in a dot or a space",
        re.compile(r"(?:^|/)(?!\.{1,2}(?:/|$))[^/]*[. ](?:/|$)"),
    ),
    ("a drive letter", re.compile(r"^[A-Za-z]:")),
    ("a variable a tool might expand ($VAR, ${VAR}, $(...))", re.compile(r"\$[A-Za-z_{(]")),
    ("a ~user home directory", re.compile(r"^~[^/]")),
)
_ANY_ODD = re.compile("|".join(f"(?:{pattern.pattern})" for _, pattern in _ODD_SPELLINGS))


# A path as written -> the odd spellings it holds ("" for none): a pure function of the
# text, remembered for the paths an agent writes again and again.
_SPELLINGS: dict[str, str] = {}


def _odd_spellings(raw: str) -> str:
    kinds = (
        ""
        if _ANY_ODD.search(raw) is None
        else ", ".join(kind for kind, pattern in _ODD_SPELLINGS if pattern.search(raw))
    )
    if len(raw) <= _PATH_KEY_LIMIT:
        if len(_SPELLINGS) >= _PATHS_LIMIT:
            _SPELLINGS.clear()
        _SPELLINGS[raw] = kinds
    return kinds


class PathSpellingRule:
    """DENY a path spelt so that different tools would read different files.

    A tool declared with ``literal_paths=True`` opts out: it takes the text as written.
    """

    rule_id = "jevqueue.paths.spelling"

    def evaluate(self, action: Action) -> Verdict | None:
        """Look at every path and working-directory argument as the model wrote it."""
        spec = action.spec
        if spec is None or spec.literal_paths:
            return None
        arguments = action.arguments
        fields = spec.path_fields if spec.cwd_field is None else (*spec.path_fields, spec.cwd_field)
        reasons: list[str] | None = None
        for field in fields:
            raw = arguments.get(field)
            if type(raw) is not str:
                continue
            kinds = _SPELLINGS.get(raw)
            if kinds is None:
                kinds = _odd_spellings(raw)
            if not kinds:
                continue
            reason = (
                f"{field} holds {kinds}, which different tools read as different files: "
                "write a plain path inside the workspace (or declare the tool with "
                "literal_paths=True if it takes paths literally)"
            )
            reasons = [reason] if reasons is None else [*reasons, reason]
        if reasons is None:
            return None
        return Verdict.deny(*reasons, rule_ids=(self.rule_id,))


class HardLinkRule:
    """Require explicit approval for writing an existing file that has other hard links.

    A hard link inside the workspace can be the same file as one outside it: writing
    through the link writes there, and no path check can tell.
    """

    rule_id = "jevqueue.paths.hardlink"
    opinion_side_effects = frozenset({FILE_WRITE})

    def evaluate(self, action: Action) -> Verdict | None:
        """Count the links of every existing target of a write."""
        if FILE_WRITE not in action.side_effects or not action.targets:
            return None
        hits: list[str] | None = None
        for field, target, below in zip(
            action.target_fields, action.targets, action.relative_targets, strict=True
        ):
            if below is None:
                continue  # outside the workspace: containment denies it anyway
            try:
                found = os.lstat(target)
            except FileNotFoundError:
                continue
            except (OSError, ValueError):
                found = None  # cannot be judged: treated as linked
            if found is None or (stat.S_ISREG(found.st_mode) and found.st_nlink > 1):
                hits = [field] if hits is None else [*hits, field]
        if hits is None:
            return None
        return Verdict.allow_with_obligations(
            (EXPLICIT_APPROVAL,),
            *(
                f"{field} is a file with more than one hard link, which may be the same file "
                "as one outside the workspace: writing it needs an explicit approval"
                for field in hits
            ),
            rule_ids=(self.rule_id,),
        )


class MissingTargetRule:
    """DENY a file tool's call that names no file: there is nothing to judge.

    A tool declared with optional path fields (``required_path_fields`` shorter than
    ``path_fields``) and a file side effect, called without any of them, would act on
    whatever the tool defaults to — unseen by every path rule.
    """

    rule_id = "jevqueue.paths.missing"
    opinion_side_effects = _FILE_EFFECTS

    def evaluate(self, action: Action) -> Verdict | None:
        """Refuse a call of a file tool with path fields when none was given."""
        if action.targets or action.side_effects.isdisjoint(_FILE_EFFECTS):
            return None
        spec = action.spec
        if spec is None or not spec.path_fields:
            return None
        return Verdict.deny(
            f"{action.tool} touches files but this call names none "
            f"({', '.join(spec.path_fields)} missing), so there is nothing to judge: pass "
            "the path explicitly",
            rule_ids=(self.rule_id,),
        )


class DeleteApprovalRule:
    """Require explicit approval for deleting files or a service's data.

    A deletion cannot be undone by the next turn. A policy file may relax this with
    ``[policy] relax = ["jevqueue.delete.approval"]``.
    """

    rule_id = "jevqueue.delete.approval"
    opinion_side_effects = frozenset({FILE_DELETE, DATA_DELETE})

    def __init__(self) -> None:
        self._verdict = Verdict.allow_with_obligations(
            (EXPLICIT_APPROVAL,),
            "deleting cannot be undone: it needs an explicit approval of this exact action digest",
            rule_ids=(self.rule_id,),
        )

    def evaluate(self, action: Action) -> Verdict | None:
        """Require an approval for every ``file_delete`` or ``data_delete``."""
        if action.side_effects.isdisjoint(self.opinion_side_effects):
            return None
        return self._verdict


RELAXABLE_RULES = frozenset({DeleteApprovalRule.rule_id})
"""Default rules a policy file may switch off (``[policy] relax``); every other default
rule holds whatever a policy file says."""


def _maybe_indirect(raw: object) -> bool:
    return type(raw) is str and (".." in raw or raw[:1] == "~")


def _indirect(raw: str) -> bool:
    return raw.startswith("~") or ".." in raw.split("/")


def default_rules() -> tuple[Rule, ...]:
    """Return fresh instances of every default rule, in evaluation order."""
    return (
        WorkspaceContainmentRule(),
        PathSpellingRule(),
        ShellWorkingDirectoryRule(),
        GitInternalsRule(),
        CredentialContentRule(),
        ShellApprovalRule(),
        CIConfigRule(),
        SecretFileRule(),
        HardLinkRule(),
        MissingTargetRule(),
        DeleteApprovalRule(),
        PathNormalizationRule(),
    )
