"""``make deploy``: the dfd stack on AWS and, unless ``--no-site``, its web pages — in one run.

  make deploy                                        # the first time: guided (sam deploy --guided + questions)
  make deploy DEPLOY_ARGS='--no-site'                # the API only
  make deploy DEPLOY_ARGS='--domain files.example.com --certificate-arn arn:aws:acm:us-east-1:...'

What one run does, in order (each step is a command printed before it runs; every step is idempotent):
1. the site stack ``<stack>-site`` (deploy/site.yaml): a private S3 bucket that only CloudFront reads (origin
   access control), HTTPS, the pages' security headers as a response-headers policy, the optional custom domain;
2. ``make sam`` (``sam validate --lint``, ``sam build``) and ``sam deploy`` of template.yaml with ``AllowedOrigins``
   = the site's own origin (its CloudFront or custom domain), so browsers on the site may call the API and PUT to
   the bucket;
3. the site stack again with the Content-Security-Policy naming the API's URL (no change once it has it);
4. the pages: web/'s page files and a ``config.js`` written from the stack's outputs (API URL, user pool
   client, region) are synced to the site bucket, then CloudFront's cache is invalidated.

The first run (no samconfig.toml) is guided: ``sam deploy --guided`` asks for the stack name, region and
parameters and saves them in samconfig.toml; the site's questions (pages or not, domain, certificate) are saved
in .dfd-deploy.json. Later runs ask nothing and pass the same arguments. The Region is --region, else the saved
one, else the AWS configuration's (AWS_REGION, AWS_DEFAULT_REGION, the profile's); without one nothing is
deployed (the pages' sign-in endpoint and CSP name it). Needs the AWS CLI, the SAM CLI and AWS credentials.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import tomllib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from dfdlocal.webheaders import hosted_connect_sources, page_csp
from dfdtools.pages import PageError, page_files
from dfdtools.tools import interruptible

ROOT = Path(__file__).resolve().parents[2]
SITE_TEMPLATE = ROOT / "deploy" / "site.yaml"
SETTINGS = ROOT / ".dfd-deploy.json"
SAMCONFIG = ROOT / "samconfig.toml"


class DeployError(Exception):
    """A step failed or a setting is missing (one line for stderr)."""


NO_REGION = (
    "no AWS Region: pass --region (it is saved for the next runs) or configure one (AWS_REGION, or the profile's "
    "region); the pages' sign-in endpoint and CSP name it"
)


@dataclass
class Settings:
    stack: str = "dfd"
    region: str = ""
    profile: str = ""
    site: bool = True
    domain: str = ""
    certificate_arn: str = ""

    @property
    def site_stack(self) -> str:
        return f"{self.stack}-site"


Runner = Callable[[Sequence[str]], None]
Outputs = Callable[[str], Mapping[str, str]]  # stack name -> its outputs ({} when it does not exist)


def run_command(command: Sequence[str]) -> None:
    print("+ " + " ".join(_quoted(part) for part in command), file=sys.stderr, flush=True)
    if subprocess.run(list(command), check=False).returncode != 0:
        raise DeployError(f"{command[0]} {command[1] if len(command) > 1 else ''} failed (see above)")


def _quoted(part: str) -> str:
    if part and all(c.isalnum() or c in "-_./:=,@" for c in part):
        return part
    return "'" + part.replace("'", "'\\''") + "'"


def stack_outputs(settings: Settings) -> Outputs:
    import boto3
    from botocore.exceptions import ClientError

    session = boto3.Session(profile_name=settings.profile or None, region_name=settings.region or None)
    client = session.client("cloudformation")

    def outputs(stack: str) -> Mapping[str, str]:
        try:
            described = client.describe_stacks(StackName=stack)["Stacks"][0]
        except ClientError as error:
            if "does not exist" in str(error):
                return {}
            raise
        return {item["OutputKey"]: item["OutputValue"] for item in described.get("Outputs", [])}

    return outputs


def site_csp(api_url: str | None, region: str) -> str:
    """The pages' CSP on AWS (dfdlocal.webheaders, the local stack's own definition): the API, S3 and Cognito."""
    sources = hosted_connect_sources(api_url or "", region)
    return page_csp(source for source in sources if source)


def config_script(outputs: Mapping[str, str], region: str) -> str:
    """config.js for the hosted pages (web/README.md, "Configuration"): the API and the user pool's client."""
    config: dict[str, Any] = {
        "apiBase": outputs["ApiUrl"].rstrip("/"),
        "auth": {
            "endpoint": f"https://cognito-idp.{region}.amazonaws.com/",
            "clientId": outputs["UserPoolClientId"],
            "region": region,
        },
    }
    return (
        "// Written by `make deploy` from the stack's outputs (scripts/dfdtools/deploy.py): do not edit here.\n"
        f"window.DFD_CONFIG = {json.dumps(config, indent=2)};\n"
    )


def _saved_deploy_parameters(samconfig: Path) -> dict[str, Any]:
    """samconfig.toml's [default.deploy.parameters] ({} without one)."""
    if not samconfig.exists():
        return {}
    document = tomllib.loads(samconfig.read_text())
    parameters = document.get("default", {}).get("deploy", {}).get("parameters", {})
    return parameters if isinstance(parameters, dict) else {}


def sam_parameters(samconfig: Path, allowed_origins: str | None) -> list[str]:
    """samconfig.toml's parameter overrides with AllowedOrigins replaced (a command line's overrides replace the
    saved ones as a whole, so the saved ones are repeated), each as `Name="value"`: SAM's parser reads an unquoted
    value only up to its first space (`ReconcileRate=15 minutes` is '15', which the parameter's pattern refuses)."""
    saved: dict[str, str] = {}
    raw = _saved_deploy_parameters(samconfig).get("parameter_overrides", "")
    items = raw if isinstance(raw, list) else _split_overrides(str(raw))
    for item in items:
        name, _, value = str(item).partition("=")
        saved[name] = _unquoted(value)
    if allowed_origins is not None:
        saved["AllowedOrigins"] = allowed_origins
    return [f"{name}={_sam_quoted(value)}" for name, value in saved.items()]


def _sam_quoted(value: str) -> str:
    """A value as SAM's guided deploy saves it (samcli GuidedConfig.quote_parameter_values, in SAM's own venv):
    double quotes, `"` escaped; SAM's parser strips them again."""
    return '"' + value.replace('"', '\\"') + '"'


def _unquoted(value: str) -> str:
    """The value a saved `Name="value"` holds, as SAM's parser reads it (samcli.cli.types._unquote_wrapped_quotes)."""
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
        value = value[1:-1]
    return value.replace("\\ ", " ").replace('\\"', '"').replace("\\'", "'")


def _split_overrides(raw: str) -> list[str]:
    """`A="1" B="x y"` -> ['A="1"', 'B="x y"'] (samconfig's string form; a backslash escapes the next character)."""
    items, current, quoted, escaped = [], "", False, False
    for char in raw:
        if escaped:
            current += char
            escaped = False
            continue
        if char == "\\":
            escaped = True
            current += char
            continue
        if char == '"':
            quoted = not quoted
        if char == " " and not quoted:
            if current:
                items.append(current)
            current = ""
            continue
        current += char
    if current:
        items.append(current)
    return items


def aws(settings: Settings, *args: str) -> list[str]:
    command = ["aws", *args]
    if settings.region:
        command += ["--region", settings.region]
    if settings.profile:
        command += ["--profile", settings.profile]
    return command


def deploy_site_stack(settings: Settings, csp: str, run: Runner) -> None:
    overrides = [f"ContentSecurityPolicy={csp}", f"DomainName={settings.domain}"]
    overrides.append(f"CertificateArn={settings.certificate_arn}")
    run(
        aws(
            settings,
            "cloudformation",
            "deploy",
            "--template-file",
            str(SITE_TEMPLATE),
            "--stack-name",
            settings.site_stack,
            "--no-fail-on-empty-changeset",
            "--parameter-overrides",
            *overrides,
        )
    )


def deploy_api_stack(settings: Settings, allowed_origins: str | None, guided: bool, run: Runner) -> None:
    # `make sam`: sam validate --lint and sam build into .aws-sam/build (where sam deploy takes it from), the build
    # make test checks, redone only when an input changed
    run(["make", "--no-print-directory", "-C", str(ROOT), "sam"])
    command = ["sam", "deploy", "--stack-name", settings.stack, "--no-fail-on-empty-changeset"]
    if guided:
        command.append("--guided")
    else:
        command += ["--capabilities", "CAPABILITY_IAM", "CAPABILITY_AUTO_EXPAND", "--resolve-s3"]
    if settings.region:
        command += ["--region", settings.region]
    if settings.profile:
        command += ["--profile", settings.profile]
    parameters = sam_parameters(SAMCONFIG, allowed_origins)
    if parameters:
        command += ["--parameter-overrides", *parameters]
    run(command)


def publish_pages(settings: Settings, site: Mapping[str, str], config_js: str, run: Runner, web: Path) -> int:
    """The pages and every file they reference (dfdtools.pages) and config.js to the site bucket (deleting what is
    no longer there), then invalidate."""
    with tempfile.TemporaryDirectory(prefix="dfd-pages-") as folder:
        staging = Path(folder)
        files = page_files(web)
        for site_path, source in files.items():
            target = staging / site_path
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)
        copied = len(files)
        (staging / "config.js").write_text(config_js)
        bucket = f"s3://{site['SiteBucketName']}/"
        run(aws(settings, "s3", "sync", str(staging), bucket, "--delete", "--cache-control", "no-cache"))
    run(
        aws(
            settings,
            "cloudfront",
            "create-invalidation",
            "--distribution-id",
            site["DistributionId"],
            "--paths",
            "/*",
        )
    )
    return copied + 1


@dataclass
class Report:
    api_url: str
    site_url: str | None
    lines: list[str] = field(default_factory=list)


def deploy(settings: Settings, *, guided: bool, run: Runner, outputs: Outputs, web: Path = ROOT / "web") -> Report:
    region = settings.region
    if not region:
        raise DeployError(NO_REGION)
    site: Mapping[str, str] = {}
    if settings.site:
        try:
            page_files(web)  # a page that references an unpublished file stops the deploy before anything changes
        except PageError as error:
            raise DeployError(str(error)) from error
        api_before = outputs(settings.stack).get("ApiUrl")
        deploy_site_stack(settings, site_csp(api_before, region), run)
        site = outputs(settings.site_stack)
        if "SiteUrl" not in site:
            raise DeployError(f"stack {settings.site_stack} has no SiteUrl output")
    deploy_api_stack(settings, site.get("SiteUrl"), guided, run)
    api = outputs(settings.stack)
    for name in ("ApiUrl", "UserPoolClientId", "UserPoolId"):
        if name not in api:
            raise DeployError(f"stack {settings.stack} has no {name} output")
    report = Report(api["ApiUrl"], site.get("SiteUrl"))
    if settings.site:
        deploy_site_stack(settings, site_csp(api["ApiUrl"], region), run)  # no change once the API is in it
        count = publish_pages(settings, site, config_script(api, region), run, web)
        report.lines.append(f"pages: {site['SiteUrl']}/  ({count} files; /admin is the dashboard)")
        if settings.domain:
            report.lines.append(f"DNS: point {settings.domain} at {site['DistributionDomainName']} (CNAME or alias)")
    report.lines += [
        f"API: {api['ApiUrl']}",
        "next: a tenant and its first users (each signs in with a temporary password, then chooses their own):",
        f"  scripts/users --stack {settings.stack} tenant acme",
        f"  scripts/users --stack {settings.stack} add alice --tenant acme",
        f"  scripts/users --stack {settings.stack} add admin --admin",
    ]
    return report


def guided_settings(saved: Settings, args: argparse.Namespace, ask: Callable[[str], str]) -> Settings:
    """The first run's questions (only what the command line did not say)."""
    settings = Settings(**asdict(saved))
    if args.stack is None:
        settings.stack = ask(f"Stack name [{settings.stack}]: ").strip() or settings.stack
    if args.region is None:
        default = settings.region
        settings.region = ask(f"AWS region [{default}]: " if default else "AWS region: ").strip() or default
    if not args.no_site:
        answer = ask("Deploy the web pages too (S3 + CloudFront, HTTPS)? [Y/n]: ").strip().lower()
        settings.site = answer not in ("n", "no")
    if settings.site and args.domain is None:
        settings.domain = ask("Custom domain for the pages (empty: CloudFront's own) []: ").strip()
        if settings.domain and not args.certificate_arn:
            settings.certificate_arn = ask(f"ACM certificate ARN for {settings.domain} (us-east-1): ").strip()
    return settings


def configured_region(profile: str) -> str:
    """The Region the AWS CLI would use: AWS_REGION, AWS_DEFAULT_REGION, else the profile's ('' when none)."""
    import botocore.session

    return str(botocore.session.Session(profile=profile or None).get_config_variable("region") or "")


def load_settings(path: Path) -> Settings | None:
    if not path.exists():
        return None
    saved = json.loads(path.read_text())
    known = {name: value for name, value in saved.items() if name in Settings.__dataclass_fields__}
    return Settings(**known)


@interruptible
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="make deploy", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--stack", help="the dfd stack's name (default: saved, else dfd)")
    parser.add_argument("--region", help="AWS region (default: saved)")
    parser.add_argument("--profile", help="AWS profile (default: saved, else the usual AWS environment)")
    parser.add_argument("--no-site", action="store_true", help="deploy the API only, not the web pages")
    parser.add_argument("--domain", help="custom domain of the pages (needs --certificate-arn)")
    parser.add_argument("--certificate-arn", help="ACM certificate (us-east-1) for --domain")
    parser.add_argument("--guided", action="store_true", help="ask again, as on the first run")
    args = parser.parse_args(argv)
    saved = load_settings(SETTINGS)
    guided = args.guided or saved is None or not SAMCONFIG.exists()
    settings = Settings(**asdict(saved)) if saved else Settings()
    settings.region = settings.region or str(_saved_deploy_parameters(SAMCONFIG).get("region", ""))
    if not settings.region and args.region is None:
        settings.region = configured_region(args.profile or settings.profile)
    if guided and sys.stdin.isatty():
        settings = guided_settings(settings, args, input)
    for name in ("stack", "region", "profile", "domain", "certificate_arn"):
        value = getattr(args, name)
        if value is not None:
            setattr(settings, name, value)
    if args.no_site:
        settings.site = False
    if settings.domain and not settings.certificate_arn:
        parser.error("--domain needs --certificate-arn (an ACM certificate in us-east-1)")
    if not settings.region:
        print(f"make deploy: {NO_REGION}", file=sys.stderr)
        return 1
    SETTINGS.write_text(json.dumps(asdict(settings), indent=2) + "\n")
    try:
        sam_guided = guided and not SAMCONFIG.exists()
        report = deploy(settings, guided=sam_guided, run=run_command, outputs=stack_outputs(settings))
    except DeployError as error:
        print(f"make deploy: {error}", file=sys.stderr)
        return 1
    print("\n".join(["", "deployed.", *report.lines]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
