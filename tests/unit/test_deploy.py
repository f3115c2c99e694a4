"""make deploy (scripts/dfdtools/deploy.py) without AWS: the order of its commands, AllowedOrigins set to the
site's origin in the same run, config.js from the outputs, the CSP of the local stack; and deploy/site.yaml's
posture (private bucket read by CloudFront only, HTTPS, security headers, optional domain)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
from cfnlint.decode import cfn_yaml

from dfdlocal.webheaders import hosted_connect_sources, page_csp
from dfdtools import deploy

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
        "sam build --template-file",
        "sam deploy --stack-name",
        "aws cloudformation deploy",  # again, with the API in the CSP
        "aws s3 sync",
        "aws cloudfront create-invalidation",
    ]
    sam = aws.commands[2]
    assert "--guided" in sam and option(sam, "--parameter-overrides") == ["AllowedOrigins=https://d111.cloudfront.net"]
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
    assert [c[:2] for c in aws.commands] == [["sam", "build"], ["sam", "deploy"]]
    # a command line's overrides replace samconfig's whole list: the saved ones are repeated
    assert option(aws.commands[1], "--parameter-overrides") == [
        "AllowedOrigins=https://mine.example",
        "CounterShards=50",
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


def test_the_site_template_passes_cfn_lint() -> None:
    from cfnlint.api import ManualArgs, lint

    problems = lint(deploy.SITE_TEMPLATE.read_text(), config=ManualArgs(regions=["us-east-1", "eu-west-1"]))
    assert [str(p) for p in problems if p.rule.id[0] in "EW"] == []  # errors and warnings; not the I(nfo) hints
