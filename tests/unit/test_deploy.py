"""make deploy (scripts/dfdtools/deploy.py) without AWS: the order of its commands, AllowedOrigins set to the
site's origin in the same run, config.js from the outputs, the CSP of the local stack, the saved parameters as
SAM's own parser reads them, the same arguments on every later run, no deploy without a Region, the pages and
every file they reference; and deploy/site.yaml's posture (private bucket read by CloudFront only, HTTPS, security
headers, optional domain)."""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
from cfnlint.decode import cfn_yaml

from dfdlocal.webheaders import hosted_connect_sources, page_csp
from dfdtools import deploy, pages

REGION = "eu-west-1"
API = "https://abc123.execute-api.eu-west-1.amazonaws.com"
SITE = {
    "SiteUrl": "https://d111.cloudfront.net",
    "SiteBucketName": "dfd-site-bucket",
    "DistributionId": "E123",
    "DistributionDomainName": "d111.cloudfront.net",
}
STACK = {"ApiUrl": API + "/", "UserPoolClientId": "client123", "UserPoolId": "eu-west-1_pool"}


class FakeAws:
    """Records the commands; stacks appear once their deploy command ran."""

    def __init__(self, existing: Mapping[str, Mapping[str, str]] | None = None) -> None:
        self.commands: list[list[str]] = []
        self.stacks: dict[str, Mapping[str, str]] = dict(existing or {})
        self.synced: dict[str, str] = {}

    def run(self, command: Sequence[str]) -> None:
        command = list(command)
        self.commands.append(command)
        if command[:3] == ["aws", "cloudformation", "deploy"]:
            self.stacks["dfd-site"] = SITE
        if command[:2] == ["sam", "deploy"]:
            self.stacks["dfd"] = STACK
        if command[:3] == ["aws", "s3", "sync"]:
            staged = Path(command[3])
            self.synced = {str(p.relative_to(staged)): p.read_text() for p in staged.rglob("*") if p.is_file()}

    def outputs(self, stack: str) -> Mapping[str, str]:
        return self.stacks.get(stack, {})


def settings(**changes: Any) -> deploy.Settings:
    return deploy.Settings(**({"stack": "dfd", "region": REGION} | changes))


def option(command: list[str], name: str) -> list[str]:
    """The values after `name` up to the next option."""
    start = command.index(name) + 1
    end = next((i for i in range(start, len(command)) if command[i].startswith("--")), len(command))
    return command[start:end]


def test_a_first_deploy_creates_the_site_then_the_api_allowing_the_sites_origin_then_publishes(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(deploy, "SAMCONFIG", tmp_path / "samconfig.toml")
    aws = FakeAws()
    report = deploy.deploy(settings(), guided=True, run=aws.run, outputs=aws.outputs)
    kinds = [" ".join(c[:3]) for c in aws.commands]
    assert kinds == [
        "aws cloudformation deploy",  # the site first: its origin is what the API must allow
        "make --no-print-directory -C",  # make sam: sam validate --lint, sam build
        "sam deploy --stack-name",
        "aws cloudformation deploy",  # again, with the API in the CSP
        "aws s3 sync",
        "aws cloudfront create-invalidation",
    ]
    sam = aws.commands[2]
    assert "--guided" in sam and option(sam, "--parameter-overrides") == [
        'AllowedOrigins="https://d111.cloudfront.net"'
    ]
    first_csp = option(aws.commands[0], "--parameter-overrides")[0]
    assert first_csp == "ContentSecurityPolicy=" + page_csp(s for s in hosted_connect_sources("", REGION) if s)
    second_csp = option(aws.commands[3], "--parameter-overrides")[0]
    assert second_csp == "ContentSecurityPolicy=" + page_csp(hosted_connect_sources(API + "/", REGION))
    assert API in second_csp and "https://cognito-idp.eu-west-1.amazonaws.com" in second_csp
    assert aws.commands[4][4] == "s3://dfd-site-bucket/" and "--delete" in aws.commands[4]
    assert option(aws.commands[5], "--distribution-id") == ["E123"]
    assert report.site_url == "https://d111.cloudfront.net" and report.api_url == API + "/"
    assert "scripts/users --stack dfd tenant acme" in "\n".join(report.lines)


def test_config_js_comes_from_the_outputs_and_only_page_files_are_published(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(deploy, "SAMCONFIG", tmp_path / "samconfig.toml")
    aws = FakeAws()
    deploy.deploy(settings(), guided=False, run=aws.run, outputs=aws.outputs)
    script = aws.synced["config.js"]
    config = json.loads(script.split("window.DFD_CONFIG = ", 1)[1].rstrip().rstrip(";"))
    assert config == {
        "apiBase": API,
        "auth": {"endpoint": "https://cognito-idp.eu-west-1.amazonaws.com/", "clientId": "client123", "region": REGION},
    }
    assert {"index.html", "admin.html", "js/auth.js", "css/style.css"} <= set(aws.synced)
    assert not {"README.md", "package.json", "package-lock.json", "config.example.js"} & set(aws.synced)
    assert not [name for name in aws.synced if name.startswith("node_modules/")]
    assert aws.synced["config.js"] != (deploy.ROOT / "web" / "config.js").read_text()  # the checkout's stays


def test_no_site_deploys_the_api_with_the_saved_parameters(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    samconfig = tmp_path / "samconfig.toml"
    samconfig.write_text(
        'version = 0.1\n[default.deploy.parameters]\nstack_name = "dfd"\n'
        'parameter_overrides = "AllowedOrigins=\\"https://mine.example\\" CounterShards=\\"50\\""\n'
    )
    monkeypatch.setattr(deploy, "SAMCONFIG", samconfig)
    aws = FakeAws()
    report = deploy.deploy(settings(site=False), guided=False, run=aws.run, outputs=aws.outputs)
    assert [c[:2] for c in aws.commands] == [["make", "--no-print-directory"], ["sam", "deploy"]]
    assert aws.commands[0][-1] == "sam"
    # a command line's overrides replace samconfig's whole list: the saved ones are repeated
    assert option(aws.commands[1], "--parameter-overrides") == [
        'AllowedOrigins="https://mine.example"',
        'CounterShards="50"',
    ]
    assert report.site_url is None


def test_a_custom_domain_goes_to_the_site_stack_and_the_dns_hint(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(deploy, "SAMCONFIG", tmp_path / "samconfig.toml")
    aws = FakeAws()
    arn = "arn:aws:acm:us-east-1:123456789012:certificate/abc"
    report = deploy.deploy(
        settings(domain="files.example.com", certificate_arn=arn), guided=False, run=aws.run, outputs=aws.outputs
    )
    overrides = option(aws.commands[0], "--parameter-overrides")
    assert overrides[1:] == ["DomainName=files.example.com", f"CertificateArn={arn}"]
    assert "DNS: point files.example.com at d111.cloudfront.net (CNAME or alias)" in report.lines


def test_a_missing_output_is_a_clear_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(deploy, "SAMCONFIG", tmp_path / "samconfig.toml")
    aws = FakeAws()
    aws.run = lambda command: aws.commands.append(list(command))  # type: ignore[method-assign]
    with pytest.raises(deploy.DeployError, match="stack dfd-site has no SiteUrl output"):
        deploy.deploy(settings(), guided=False, run=aws.run, outputs=aws.outputs)


# ------------------------------------------------------------------------------------------------------------
# the saved parameters, read by the SAM CLI itself (its own venv: `make sam-cli`), and a deploy that runs twice
# ------------------------------------------------------------------------------------------------------------
SAM_PYTHON = deploy.ROOT / ".venv-sam" / "bin" / "python"


@pytest.fixture(scope="module")
def sam_python() -> Path:
    done = subprocess.run(["make", "--no-print-directory", "-C", str(deploy.ROOT), "sam-cli"], capture_output=True)
    assert done.returncode == 0 and SAM_PYTHON.exists(), done.stderr[-2000:]
    return SAM_PYTHON


def _in_sam(sam_python: Path, code: str, *args: str) -> Any:
    done = subprocess.run([str(sam_python), "-c", code, *args], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


def sam_reads(sam_python: Path, overrides: Sequence[str]) -> dict[str, str]:
    """What `sam deploy --parameter-overrides ARGS` passes to CloudFormation: SAM's own parser on the arguments."""
    code = (
        "import json, sys\nfrom samcli.cli.types import CfnParameterOverridesType\n"
        "print(json.dumps(CfnParameterOverridesType().convert(tuple(sys.argv[1:]), None, None)))"
    )
    return dict(_in_sam(sam_python, code, *overrides))


def sam_saves(sam_python: Path, folder: Path, stack: str, region: str, parameters: Mapping[str, str]) -> None:
    """samconfig.toml as `sam deploy --guided` writes it: SAM's own quoting and its own config writer."""
    code = (
        "import json, sys\nfrom samcli.commands.deploy.guided_config import GuidedConfig\n"
        "from samcli.lib.config.samconfig import SamConfig\n"
        "folder, stack, region, parameters = sys.argv[1], sys.argv[2], sys.argv[3], json.loads(sys.argv[4])\n"
        "config = SamConfig(folder)\n"
        "overrides = ' '.join(f'{k}={GuidedConfig.quote_parameter_values(v)}' for k, v in parameters.items())\n"
        "for key, value in (('stack_name', stack), ('region', region), ('parameter_overrides', overrides)):\n"
        "    config.put(['deploy'], 'parameters', key, value)\n"
        "config.flush()\nprint('{}')"
    )
    _in_sam(sam_python, code, str(folder), stack, region, json.dumps(dict(parameters)))


# a value with a space (SAM reads `ReconcileRate=15 minutes` as '15'), and one with quotes and a backslash
ANSWERS = {"ReconcileRate": "15 minutes", "OpsNote": 'say "hi" to C:\\ops', "CounterShards": "16"}


def test_saved_parameters_go_back_to_sam_as_saved(sam_python: Path, tmp_path: Path) -> None:
    saved = {"AllowedOrigins": "https://old.example", **ANSWERS}
    sam_saves(sam_python, tmp_path, "dfd", REGION, saved)
    arguments = deploy.sam_parameters(tmp_path / "samconfig.toml", "https://d111.cloudfront.net")
    assert sam_reads(sam_python, arguments) == saved | {"AllowedOrigins": "https://d111.cloudfront.net"}
    # what it replaces: unquoted, SAM cut the value at its first space, which ReconcileRate's pattern refuses
    assert sam_reads(sam_python, ["ReconcileRate=15 minutes"]) == {"ReconcileRate": "15"}


class Recording(FakeAws):
    """The AWS and SAM CLIs as `make deploy` sees them: `sam deploy --guided` asks the questions (ANSWERS) and saves
    samconfig.toml as SAM does."""

    def __init__(self, sam_python: Path, samconfig: Path) -> None:
        super().__init__()
        self.sam_python, self.samconfig = sam_python, samconfig
        self.deployed: dict[str, str] = {}

    def run(self, command: Sequence[str]) -> None:
        super().run(command)
        if list(command[:2]) == ["sam", "deploy"]:
            given = sam_reads(self.sam_python, option(list(command), "--parameter-overrides"))
            self.deployed = given if "--guided" not in command else given | ANSWERS
            if "--guided" in command:
                region = option(list(command), "--region")[0]
                sam_saves(self.sam_python, self.samconfig.parent, "dfd", region, self.deployed)


def test_make_deploy_runs_twice_with_the_same_arguments(
    sam_python: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(deploy, "SAMCONFIG", tmp_path / "samconfig.toml")
    monkeypatch.setattr(deploy, "SETTINGS", tmp_path / ".dfd-deploy.json")
    aws = Recording(sam_python, tmp_path / "samconfig.toml")
    monkeypatch.setattr(deploy, "run_command", aws.run)
    monkeypatch.setattr(deploy, "stack_outputs", lambda settings: aws.outputs)

    def make_deploy(*args: str) -> tuple[list[list[str]], dict[str, str]]:
        aws.commands, aws.deployed = [], {}
        assert deploy.main(list(args)) == 0
        for command in aws.commands:  # the pages' staging folder is a new temporary one each run
            if command[:3] == ["aws", "s3", "sync"]:
                command[3] = "STAGED"
        return aws.commands, aws.deployed

    guided, first_parameters = make_deploy("--region", REGION)  # the first run: sam deploy --guided saves
    assert "--guided" in guided[2] and first_parameters["ReconcileRate"] == "15 minutes"
    first, parameters = make_deploy()
    second, parameters_again = make_deploy()
    assert second == first
    assert parameters == parameters_again == first_parameters  # CloudFormation gets what the user answered
    sam = first[2]
    assert "--guided" not in sam and option(sam, "--region") == [REGION]


def test_no_region_no_deploy(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(deploy, "SAMCONFIG", tmp_path / "samconfig.toml")
    monkeypatch.setattr(deploy, "SETTINGS", tmp_path / ".dfd-deploy.json")
    for name in ("AWS_REGION", "AWS_DEFAULT_REGION", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-config"))
    aws = FakeAws()
    monkeypatch.setattr(deploy, "run_command", aws.run)
    monkeypatch.setattr(deploy, "stack_outputs", lambda settings: aws.outputs)
    assert deploy.main([]) == 1
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("make deploy: no AWS Region: pass --region")
    assert aws.commands == [] and not (tmp_path / ".dfd-deploy.json").exists()
    with pytest.raises(deploy.DeployError, match="no AWS Region"):
        deploy.deploy(settings(region=""), guided=False, run=aws.run, outputs=aws.outputs)
    assert aws.commands == []

    # a configured Region (the AWS CLI's) is used, and saved for the next runs
    monkeypatch.setenv("AWS_DEFAULT_REGION", "eu-central-1")
    assert deploy.main([]) == 0
    assert option(aws.commands[2], "--region") == ["eu-central-1"]
    assert "https://cognito-idp.eu-central-1.amazonaws.com/" in aws.synced["config.js"]
    assert json.loads((tmp_path / ".dfd-deploy.json").read_text())["region"] == "eu-central-1"


# ------------------------------------------------------------------------------------------------------------
# the published pages: every file a page references
# ------------------------------------------------------------------------------------------------------------
def test_every_file_the_pages_reference_is_published(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(deploy, "SAMCONFIG", tmp_path / "samconfig.toml")
    aws = FakeAws()
    deploy.deploy(settings(), guided=False, run=aws.run, outputs=aws.outputs)
    referenced = pages.page_files()
    assert set(aws.synced) == set(referenced) | {"config.js"}
    # what the pages load beyond their HTML and scripts: the Dashboard's stylesheet, Swagger UI's, the spec /docs loads
    assert {"vendor/uppy/uppy.css", "vendor/swagger-ui/swagger-ui.css", "openapi.yaml"} <= set(aws.synced)
    assert {"index.html", "admin.html", "docs.html", "js/upload.js", "vendor/uppy/uppy.js"} <= set(aws.synced)
    assert aws.synced["openapi.yaml"] == (deploy.ROOT / "docs" / "openapi.yaml").read_text()


def _site(tmp_path: Path, files: Mapping[str, str]) -> Path:
    web = tmp_path / "web"
    for name, text in files.items():
        (web / name).parent.mkdir(parents=True, exist_ok=True)
        (web / name).write_text(text)
    return web


def test_references_are_followed_through_html_js_and_css(tmp_path: Path) -> None:
    web = _site(
        tmp_path,
        {
            "index.html": '<link rel="icon" href="data:,"><link rel=stylesheet href="css/a.css">'
            '<script src="config.js"></script><script type=module src="js/main.js"></script>'
            '<a href="#top">top</a><a href="https://example.com/x.js">out</a><a href="./other.html?x#y">o</a>'
            '<img src="img/logo%20big.png">',
            "other.html": '<a href="./">home</a>',
            "css/a.css": '@import "b.css";\nbody { background: url(../img/bg.png) }',
            "css/b.css": "p { background: url('data:image/png;base64,AA') } i { background: url(\"../img/i.svg\") }",
            "js/main.js": 'import { x } from "./lib/x.js";\nconst y = await import("../vendor/y.js");\n'
            'const spec = new URL("openapi.yaml", window.location.href);\n'
            'const wasm = new URL("./w.wasm", import.meta.url);\nimport "./side.js";\n',
            "js/lib/x.js": "export const x = 1;",
            "js/side.js": "",
            "js/w.wasm": "",
            "vendor/y.js": "",
            "img/logo big.png": "",
            "img/bg.png": "",
            "img/i.svg": "",
            "README.md": "not a page's",
        },
    )
    spec = tmp_path / "openapi.yaml"
    spec.write_text("openapi: 3.1.0")
    found = pages.page_files(web, {"openapi.yaml": spec})
    assert set(found) == {
        "index.html", "other.html", "css/a.css", "css/b.css", "js/main.js", "js/lib/x.js", "js/side.js",
        "js/w.wasm", "vendor/y.js", "img/logo big.png", "img/bg.png", "img/i.svg", "openapi.yaml",
    }  # fmt: skip
    assert found["openapi.yaml"] == spec


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("index.html", '<link rel="stylesheet" href="vendor/uppy/missing.css">'),
        ("css/style.css", "body { background: url(../images/gone.png) }"),
        ("js/upload.js", 'import { nope } from "./nope.js";'),
    ],
)
def test_a_reference_that_would_not_be_published_stops_the_deploy(
    name: str, text: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(deploy, "SAMCONFIG", tmp_path / "samconfig.toml")
    web = tmp_path / "web"
    shutil.copytree(deploy.ROOT / "web", web, ignore=shutil.ignore_patterns("node_modules"))
    with (web / name).open("a") as page:
        page.write("\n" + text + "\n")
    aws = FakeAws()
    with pytest.raises(deploy.DeployError, match=f"would not be published: {name} -> "):
        deploy.deploy(settings(), guided=False, run=aws.run, outputs=aws.outputs, web=web)
    assert aws.commands == []  # nothing deployed, nothing half-published


# ------------------------------------------------------------------------------------------------------------
# deploy/site.yaml
# ------------------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def site() -> dict[str, Any]:
    return dict(cfn_yaml.load(str(deploy.SITE_TEMPLATE)))


def resources(template: Mapping[str, Any], kind: str) -> list[dict[str, Any]]:
    return [r["Properties"] for r in template["Resources"].values() if r["Type"] == kind]


def test_the_site_bucket_is_private_and_read_by_cloudfront_only(site: dict[str, Any]) -> None:
    (bucket,) = resources(site, "AWS::S3::Bucket")
    assert all(bucket["PublicAccessBlockConfiguration"].values())
    assert "WebsiteConfiguration" not in bucket  # never an S3 website (plain HTTP, public)
    (policy,) = resources(site, "AWS::S3::BucketPolicy")
    allow, deny = policy["PolicyDocument"]["Statement"]
    assert allow["Principal"] == {"Service": "cloudfront.amazonaws.com"} and allow["Action"] == "s3:GetObject"
    assert "AWS:SourceArn" in allow["Condition"]["StringEquals"]
    assert deny["Effect"] == "Deny" and deny["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}
    (oac,) = resources(site, "AWS::CloudFront::OriginAccessControl")
    assert oac["OriginAccessControlConfig"]["SigningBehavior"] == "always"


def test_the_distribution_is_https_with_the_pages_security_headers(site: dict[str, Any]) -> None:
    (distribution,) = resources(site, "AWS::CloudFront::Distribution")
    config = distribution["DistributionConfig"]
    assert config["DefaultCacheBehavior"]["ViewerProtocolPolicy"] == "redirect-to-https"
    assert config["Origins"][0]["OriginAccessControlId"] == {"Fn::GetAtt": ["OriginAccessControl", "Id"]}
    assert config["DefaultCacheBehavior"]["ResponseHeadersPolicyId"] == {"Ref": "SecurityHeaders"}
    (policy,) = resources(site, "AWS::CloudFront::ResponseHeadersPolicy")
    headers = policy["ResponseHeadersPolicyConfig"]["SecurityHeadersConfig"]
    assert headers["ContentSecurityPolicy"]["ContentSecurityPolicy"] == {"Ref": "ContentSecurityPolicy"}
    assert headers["FrameOptions"]["FrameOption"] == "DENY"
    assert headers["ReferrerPolicy"]["ReferrerPolicy"] == "no-referrer"
    custom = policy["ResponseHeadersPolicyConfig"]["CustomHeadersConfig"]["Items"]
    assert {"Header": "Cross-Origin-Opener-Policy", "Value": "same-origin", "Override": True} in custom
    # the custom domain: alias + ACM certificate only when DomainName is given
    assert config["Aliases"]["Fn::If"][0] == "HasDomain"
    assert config["ViewerCertificate"]["Fn::If"][1]["AcmCertificateArn"] == {"Ref": "CertificateArn"}
    assert "DomainNeedsCertificate" in site["Rules"]


def test_every_page_has_its_short_path_on_cloudfront_as_on_the_local_stack(site: dict[str, Any]) -> None:
    # the local stack serves /NAME as web/NAME.html; CloudFront's viewer-request function must map the same paths
    (function,) = resources(site, "AWS::CloudFront::Function")
    code = function["FunctionCode"]
    pages = sorted(p.stem for p in (deploy.ROOT / "web").glob("*.html") if p.stem != "index")
    assert pages == ["admin", "docs"]
    for page in pages:
        for path in (f"/{page}", f"/{page}/"):
            assert f'"{path}": "/{page}.html"' in code, path


def test_the_site_template_passes_cfn_lint() -> None:
    from cfnlint.api import ManualArgs, lint

    problems = lint(deploy.SITE_TEMPLATE.read_text(), config=ManualArgs(regions=["us-east-1", "eu-west-1"]))
    assert [str(p) for p in problems if p.rule.id[0] in "EW"] == []  # errors and warnings; not the I(nfo) hints
