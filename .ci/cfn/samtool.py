#!/usr/bin/env python3
"""samtool: template.yaml through AWS's own tools, offline.

    samtool.py [--template PATH] COMMAND ...
    samtool.py paramsets [--raw]   the parameter sets, as JSON
    samtool.py lint                cfn-lint for every parameter set
    samtool.py translate SET [--param K=V]... [--code FUNCTION=KEY]...
                                   SET's template as SAM translates it (JSON)
    samtool.py versions FILE       the functions and versions SAM makes of each
                                   variant FILE lists (see cmd_versions)
    samtool.py rehearse SET [--param K=V]... [--invoke FUNCTION=URL]...
                                   create SET's translated stack in moto

A parameter set is what one deployment gives the template: "defaults" (the
template's defaults, with EXAMPLES for the parameters that have none) and
"samconfig.ENV" for each environment of samconfig.toml (its
parameter_overrides, read as SAM CLI reads them). samconfig.toml holds
REPLACE_ME where an account's own value belongs; the template's patterns
refuse it, so an unedited deploy fails before it creates anything. The sets
here fill each REPLACE_ME with the parameter's example; --raw leaves them,
and every set carries the problems that CloudFormation's parameter checks
would report (AllowedPattern, AllowedValues, MinValue, MaxValue, missing).

`make lint` runs `lint`; the Go tests in internal/dev/deploy run the other
commands (see internal/dev/deploy/doc.go). Nothing here needs credentials or a
network: the managed-policy names SAM looks up are answered locally, and
moto's CloudFormation runs in this process, on a free loopback port.

A custom resource (Custom::*) is created by invoking its function, which
moto cannot run: `rehearse` hands each such invocation to the Lambda
runtime emulator (aws-lambda-rie) running that function at URL, given as
--invoke FUNCTION=URL with the function's logical id, and the function's
answer to moto's CloudFormation completes the resource (see
bridge_custom_resources).
"""

import argparse
import io
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
import tomllib
import zipfile

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
TEMPLATE = os.path.join(ROOT, "template.yaml")
SAMCONFIG = os.path.join(ROOT, "samconfig.toml")

REGION = "us-east-1"
ACCOUNT = "123456789012"
STACK = "jobboard"
CODE_BUCKET = "jobboard-artifacts"

# The placeholder samconfig.toml holds where an account's own value belongs.
PLACEHOLDER = "REPLACE_ME"

# Example values, for the parameters without a default and for every
# placeholder of samconfig.toml. The rehearsal replaces the VPC's with the
# ids of a VPC it creates in moto.
EXAMPLES = {
    "DatabaseSecretArn": f"arn:aws:secretsmanager:{REGION}:{ACCOUNT}:secret:jobboard-db-AbCdEf",
    "MailFrom": "jobboard <jobs@example.com>",
    "MailFromIdentity": "example.com",
    "VerifyEmailUrl": "https://app.example.com/verify-email",
    "AccountRecoveryUrl": "https://app.example.com/reset-password",
    "AlarmTopicArn": f"arn:aws:sns:{REGION}:{ACCOUNT}:jobboard-alarms",
    "SubnetIds": "subnet-0123456789abcdef0,subnet-0fedcba9876543210",
    "SecurityGroupIds": "sg-0123456789abcdef0",
    "VpcId": "vpc-0123456789abcdef0",
    "DatabaseInstanceIdentifier": "jobboard-prod",
    "CorsAllowedOrigins": "https://app.example.com",
}


def load_template():
    from samtranslator.yaml_helper import yaml_parse

    with open(TEMPLATE, encoding="utf-8") as f:
        return yaml_parse(f.read())


def is_list(param):
    t = param.get("Type", "String")
    return t == "CommaDelimitedList" or t.startswith("List<")


def samconfig_envs():
    """Each environment's parameter_overrides, split as SAM CLI splits them."""
    with open(SAMCONFIG, "rb") as f:
        config = tomllib.load(f)
    envs = {}
    for env, commands in config.items():
        if not isinstance(commands, dict):
            continue
        overrides = commands.get("deploy", {}).get("parameters", {}).get("parameter_overrides")
        if overrides is None:
            continue
        if isinstance(overrides, list):
            overrides = " ".join(overrides)
        values = {}
        for token in shlex.split(overrides):
            key, sep, value = token.partition("=")
            if not sep:
                raise SystemExit(f"samconfig.toml [{env}]: override {token!r} is not KEY=VALUE")
            values[key] = value
        envs[env] = values
    return envs


def problems(template, values):
    """What CloudFormation's parameter checks say about values (strings)."""
    out = []
    params = template.get("Parameters", {})
    for name in values:
        if name not in params:
            out.append(f"{name}: not a parameter of the template")
    for name, p in params.items():
        if name not in values:
            if "Default" not in p:
                out.append(f"{name}: required (no default), not given")
            continue
        raw = values[name]
        members = raw.split(",") if is_list(p) else [raw]
        for v in members:
            if "AllowedPattern" in p and re.fullmatch(p["AllowedPattern"], v) is None:
                out.append(f"{name}: {v!r} does not match AllowedPattern {p['AllowedPattern']}")
            if "AllowedValues" in p and v not in [str(a) for a in p["AllowedValues"]]:
                out.append(f"{name}: {v!r} is not one of AllowedValues")
            if p.get("Type") == "Number":
                try:
                    n = float(v)
                except ValueError:
                    out.append(f"{name}: {v!r} is not a number")
                    continue
                if "MinValue" in p and n < float(p["MinValue"]):
                    out.append(f"{name}: {v} is below MinValue {p['MinValue']}")
                if "MaxValue" in p and n > float(p["MaxValue"]):
                    out.append(f"{name}: {v} is above MaxValue {p['MaxValue']}")
    return out


def param_sets(template, raw=False):
    """{name: {"values": {param: string}, "problems": [...]}}, values complete."""
    params = template.get("Parameters", {})
    defaults = {k: str(p["Default"]) for k, p in params.items() if "Default" in p}
    sets = {"defaults": {**defaults, **{k: EXAMPLES[k] for k, p in params.items() if "Default" not in p}}}
    for env, overrides in samconfig_envs().items():
        given = {}
        for k, v in overrides.items():
            if v == PLACEHOLDER or PLACEHOLDER in v.split(","):
                given[k] = v if raw else EXAMPLES[k]
            else:
                given[k] = v
        sets["samconfig." + env] = {**defaults, **given}
    return {name: {"values": v, "problems": problems(template, v)} for name, v in sets.items()}


class _Policies(dict):
    """The managed-policy map SAM asks IAM for: every name is an AWS managed policy."""

    def get(self, name, default=None):
        return f"arn:aws:iam::aws:policy/{name}"

    def __getitem__(self, name):
        return self.get(name)

    def __contains__(self, name):
        return True


def translate(values, template=None, code=None):
    """The template as SAM (and so CloudFormation's transform) translates it.

    Each function's code is s3://CODE_BUCKET/<logical id>.zip, or the key
    code gives it: what `sam deploy` uploads when a build changes the
    function (it names the object after its contents).
    """
    os.environ.setdefault("AWS_DEFAULT_REGION", REGION)
    from samtranslator.translator.managed_policy_translator import ManagedPolicyLoader
    from samtranslator.translator.transform import transform

    class OfflinePolicies(ManagedPolicyLoader):
        def __init__(self):
            pass

        def load(self):
            return _Policies()

    template = template or load_template()
    for name, r in template.get("Resources", {}).items():
        if r.get("Type") == "AWS::Serverless::Function":
            r["Properties"]["CodeUri"] = f"s3://{CODE_BUCKET}/{(code or {}).get(name, name + '.zip')}"
    # CloudFormation evaluates the parameters before it hands them to the
    # transform: a list parameter arrives as a list.
    params = template.get("Parameters", {})
    pv = {k: v.split(",") if k in params and is_list(params[k]) else v for k, v in values.items()}
    pv.update({
        "AWS::Region": REGION,
        "AWS::AccountId": ACCOUNT,
        "AWS::Partition": "aws",
        "AWS::StackName": STACK,
        "AWS::URLSuffix": "amazonaws.com",
    })
    import logging

    logging.getLogger("samtranslator").setLevel(logging.ERROR)
    return transform(template, pv, OfflinePolicies())


def cmd_paramsets(args):
    json.dump(param_sets(load_template(), raw=args.raw), sys.stdout, indent=1, sort_keys=True)
    print()


def chosen_values(template, args):
    """The values of the set args.set, with args.param's KEY=VALUE on top."""
    sets = param_sets(template)
    if args.set not in sets:
        raise SystemExit(f"no parameter set {args.set!r}; there are {sorted(sets)}")
    values = dict(sets[args.set]["values"])
    for kv in args.param or []:
        key, sep, value = kv.partition("=")
        if not sep or key not in template.get("Parameters", {}):
            raise SystemExit(f"--param {kv!r}: want KEY=VALUE for a parameter of the template")
        values[key] = value
    bad = problems(template, values)
    if bad:
        raise SystemExit(f"parameter set {args.set!r}: " + "; ".join(bad))
    return values


def cmd_translate(args):
    template = load_template()
    values = chosen_values(template, args)
    code = {}
    for kv in args.code or []:
        function, sep, key = kv.partition("=")
        if not sep or template.get("Resources", {}).get(function, {}).get("Type") != "AWS::Serverless::Function":
            raise SystemExit(f"--code {kv!r}: want FUNCTION=KEY for a function of the template")
        code[function] = key
    json.dump({"values": values, "template": translate(values, template, code)}, sys.stdout, indent=1, sort_keys=True)
    print()


def cmd_versions(args):
    """Translate many variants in one process; print each one's functions.

    FILE holds a JSON list of variants, each {"set": SET, "params": {K: V},
    "code": {FUNCTION: KEY}} as translate's arguments. For each, in order,
    the values and the translation's Parameters, Conditions, and its
    AWS::Lambda::Function and AWS::Lambda::Version resources: what the
    tests of version publishing compare, without a whole template per
    variant.
    """
    template = load_template()
    with open(args.file, encoding="utf-8") as f:
        variants = json.load(f)
    out = []
    for v in variants:
        args.set, args.param = v["set"], [f"{k}={x}" for k, x in (v.get("params") or {}).items()]
        values = chosen_values(template, args)
        t = translate(values, json.loads(json.dumps(template)), v.get("code") or {})
        keep = {"AWS::Lambda::Function", "AWS::Lambda::Version"}
        out.append({"values": values, "template": {
            "Parameters": t.get("Parameters", {}),
            "Conditions": t.get("Conditions", {}),
            "Resources": {k: r for k, r in t["Resources"].items() if r["Type"] in keep},
        }})
    json.dump(out, sys.stdout, sort_keys=True)
    print()


def cmd_lint(args):
    """cfn-lint, informational findings included, once per parameter set.

    Lists are lists in the parameter files (--parameters K=V cannot say
    them). Any finding fails: errors and warnings must be fixed; an
    informational one that cannot be is ignored beside its setting in
    template.yaml (Metadata cfn-lint), where the reason is written.
    """
    template = load_template()
    params = template.get("Parameters", {})
    failed = False
    with tempfile.TemporaryDirectory() as tmp:
        runs = []
        for name, s in param_sets(template).items():
            entries = []
            for k, v in sorted(s["values"].items()):
                entries.append({"ParameterKey": k, "ParameterValue": v.split(",") if is_list(params[k]) else v})
            path = os.path.join(tmp, name + ".json")
            with open(path, "w", encoding="utf-8") as f:
                json.dump(entries, f)
            cmd = [sys.executable, "-c", "import sys; from cfnlint.runner import main; sys.exit(main())",
                   "--include-checks", "I", "--non-zero-exit-code", "informational",
                   "--parameter-files", path, "--", TEMPLATE]
            # The sets are linted side by side: each run is a second or two
            # of one core.
            proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=ROOT)
            runs.append((name, s, proc))
        for name, s, proc in runs:
            out = proc.communicate()[0].strip()
            findings = len(re.findall(r"^[EWI]\d{4} ", out, re.M))
            print(f"cfn-lint {cfn_lint_version()} {os.path.relpath(TEMPLATE, ROOT)} [{name}]: {findings} findings")
            if out:
                print(out)
            if s["problems"]:
                print(f"[{name}] parameter values:\n  " + "\n  ".join(s["problems"]))
            if proc.returncode != 0 or s["problems"]:
                failed = True
    if failed:
        raise SystemExit(1)


def cfn_lint_version():
    from importlib.metadata import version

    return version("cfn-lint")


# --------------------------------------------------------------- moto --

def schema_of(resource_type):
    """cfn-lint's bundled CloudFormation resource schema of resource_type."""
    from cfnlint.schema.manager import PROVIDER_SCHEMA_MANAGER

    return PROVIDER_SCHEMA_MANAGER.get_resource_schema(REGION, resource_type).schema


def attributes_of(schema):
    """The GetAtt names a schema allows: its read-only properties, dotted."""
    out = set()
    for p in schema.get("readOnlyProperties", []):
        out.add(".".join(p.removeprefix("/properties/").split("/")))
    return out


class StandInError(Exception):
    """A stand-in's refusal. moto's server answers it with a 500 and logs
    the traceback from its request thread, which may come after the client
    has its answer; so each refusal is also kept here, in this process, for
    the rehearsal to report itself."""

    raised = []

    def __init__(self, message):
        super().__init__(message)
        StandInError.raised.append(message)


def register_stand_ins():
    """Give moto's CloudFormation a stand-in for each type it lacks.

    A stand-in creates nothing: it checks the resource's properties against
    the type's schema (every required property present, exactly one of each
    requiredXor set, the dependentRequired and dependentExcluded pairs
    respected, no property the type does not have) and answers Ref with a
    name and Fn::GetAtt only for the attributes the schema lists. A few keep what moto's own resources
    look up: an alias registers itself with moto's Lambda, so that the
    event source mapping and the schedule can find the function behind it.
    Returns the types, and the record of what each stand-in checked.
    """
    from moto.cloudformation import parsing
    from moto.core.common_models import CloudFormationModel

    known = parsing.get_model_map()
    # The types the stand-ins are for; anything else moto lacks fails the
    # rehearsal instead of passing unchecked.
    wanted = [
        "AWS::ApiGatewayV2::Api", "AWS::ApiGatewayV2::Stage",
        "AWS::CloudWatch::Alarm",
        "AWS::CodeDeploy::Application", "AWS::CodeDeploy::DeploymentGroup",
        "AWS::Lambda::Alias", "AWS::Lambda::EventInvokeConfig",
        "AWS::RDS::DBProxy", "AWS::RDS::DBProxyTargetGroup",
        "AWS::SecretsManager::Secret", "AWS::SQS::QueuePolicy",
        "AWS::SES::ConfigurationSet", "AWS::SES::ConfigurationSetEventDestination",
        "AWS::SNS::Subscription", "AWS::SNS::TopicPolicy",
    ]
    checked = []
    created = []

    def make(resource_type):
        schema = schema_of(resource_type)
        required = schema.get("required", [])
        allowed = set(schema.get("properties", {}))
        attrs = attributes_of(schema)

        class StandIn(CloudFormationModel):
            # moto files its models by the module's second part.
            __module__ = "samtool.standins"

            def __init__(self, logical_id, name, props, account_id, region_name):
                self.logical_id = logical_id
                self.name = name
                self.props = props
                self.account_id = account_id
                self.region_name = region_name

            @staticmethod
            def cloudformation_type():
                return resource_type

            @staticmethod
            def cloudformation_name_type():
                return ""

            @classmethod
            def has_cfn_attr(cls, attr):
                return attr in attrs

            @classmethod
            def create_from_cloudformation_json(cls, resource_name, cloudformation_json, account_id, region_name, **kwargs):
                logical_id = kwargs.get("LogicalId", resource_name)
                props = cloudformation_json.get("Properties", {})
                missing = [p for p in required if p not in props]
                unknown = [p for p in props if p not in allowed]
                if missing or unknown:
                    raise StandInError(f"{logical_id} ({resource_type}): missing required {missing}, unknown {unknown}")
                xor = schema.get("requiredXor", [])
                if xor and sum(p in props for p in xor) != 1:
                    raise StandInError(f"{logical_id} ({resource_type}): want exactly one of {xor}")
                for p, needs in schema.get("dependentRequired", {}).items():
                    if p in props and any(n not in props for n in needs):
                        raise StandInError(f"{logical_id} ({resource_type}): {p} needs {needs}")
                for p, excludes in schema.get("dependentExcluded", {}).items():
                    if p in props and any(x in props for x in excludes):
                        raise StandInError(f"{logical_id} ({resource_type}): {p} excludes {excludes}")
                checked.append({"LogicalId": logical_id, "Type": resource_type, "Required": required})
                res = cls(logical_id, resource_name, props, account_id, region_name)
                if resource_type == "AWS::Lambda::Alias":
                    res.name = register_alias(props, account_id, region_name)
                created.append(logical_id)
                return res

            @property
            def physical_resource_id(self):
                return self.name

            def get_cfn_attribute(self, attribute_name):
                if attribute_name not in attrs:
                    raise StandInError(f"Fn::GetAtt {self.logical_id}.{attribute_name}: {resource_type} has no such attribute ({sorted(attrs)})")
                return f"{self.name}.{attribute_name}"

        StandIn.__name__ = "StandIn" + resource_type.replace("::", "")
        return StandIn

    for t in wanted:
        if t in known:
            raise SystemExit(f"moto supports {t} now: drop its stand-in")
        known[t] = make(t)
    return wanted, checked


def drop_novalue_in_lists():
    """Make moto drop AWS::NoValue from lists, as CloudFormation does.

    moto resolves !Ref AWS::NoValue to None and removes it from objects,
    but keeps it in lists (a policy statement under !If [UseVpc, ...,
    !Ref AWS::NoValue] then reaches IAM as null).
    """
    from moto.cloudformation import parsing

    original = parsing.clean_json

    def clean_json(resource_json, resources_map):
        if isinstance(resource_json, list):
            cleaned = (clean_json(v, resources_map) for v in resource_json)
            return [v for v in cleaned if v is not None]
        return original(resource_json, resources_map)

    parsing.clean_json = clean_json


def compare_as_strings():
    """Make moto's Fn::Equals compare strings, as CloudFormation does.

    moto turns a Number parameter into a Python number, so
    !Equals [!Ref Count, "0"] is never true there; in CloudFormation a
    parameter's value "becomes a string" wherever it is referenced
    (https://docs.aws.amazon.com/AWSCloudFormation/latest/UserGuide/parameters-section-structure.html).
    """
    from moto.cloudformation import parsing

    original = parsing.parse_condition

    def text(v):
        return str(v).lower() if isinstance(v, bool) else str(v)

    def parse_condition(condition, resources_map, condition_map):
        if isinstance(condition, dict) and list(condition) == ["Fn::Equals"]:
            a, b = (parsing.clean_json(v, resources_map) for v in condition["Fn::Equals"])
            return text(a) == text(b)
        return original(condition, resources_map, condition_map)

    parsing.parse_condition = parse_condition


def complete_lambda_version():
    """Give moto's AWS::Lambda::Version what it lacks: Ref and Fn::GetAtt.

    moto publishes the version but answers Ref with its Python object and
    has no GetAtt at all. CloudFormation answers Ref with the version's
    ARN, and GetAtt with the schema's read-only properties (Version, the
    number an alarm's dimension needs, and FunctionArn).
    """
    from moto.awslambda.models import LambdaVersion, lambda_backends

    attrs = attributes_of(schema_of("AWS::Lambda::Version"))

    @classmethod
    def create_from_cloudformation_json(cls, resource_name, cloudformation_json, account_id, region_name, **kwargs):
        fn = lambda_backends[account_id][region_name].publish_version(cloudformation_json["Properties"]["FunctionName"])
        v = cls({"Version": fn.version})
        v.function_arn = fn.function_arn.removesuffix(f":{fn.version}")
        return v

    def get_cfn_attribute(self, attribute_name):
        if attribute_name not in attrs:
            raise StandInError(f"Fn::GetAtt AWS::Lambda::Version.{attribute_name}: no such attribute ({sorted(attrs)})")
        return {"Version": str(self.version), "FunctionArn": self.function_arn}[attribute_name]

    LambdaVersion.create_from_cloudformation_json = create_from_cloudformation_json
    LambdaVersion.get_cfn_attribute = get_cfn_attribute
    LambdaVersion.physical_resource_id = property(lambda self: f"{self.function_arn}:{self.version}")


def complete_iam_role():
    """Give moto's AWS::IAM::Role what it lacks: ManagedPolicyArns.

    moto creates the role and its inline Policies but attaches none of its
    managed policies. Attaching them here also checks that each exists:
    an AWS managed policy must be one moto knows (it loads AWS's list, with
    the documents, under MOTO_IAM_LOAD_MANAGED_POLICIES).
    """
    from moto.iam.models import Role, iam_backends
    from moto.utilities.utils import get_partition

    original = Role.create_from_cloudformation_json.__func__

    @classmethod
    def create_from_cloudformation_json(cls, resource_name, cloudformation_json, account_id, region_name, **kwargs):
        role = original(cls, resource_name, cloudformation_json, account_id, region_name, **kwargs)
        backend = iam_backends[account_id][get_partition(region_name)]
        for arn in cloudformation_json["Properties"].get("ManagedPolicyArns", []):
            backend.attach_role_policy(arn, role.name)
        return role

    Role.create_from_cloudformation_json = create_from_cloudformation_json


def bridge_custom_resources():
    """Queue moto's invocations of custom resource functions; return the queue.

    moto's CloudFormation creates a Custom:: resource by invoking the
    function its ServiceToken names, from a thread, through moto's Lambda,
    which runs functions in Docker (there is none here), and waits for the
    answer at its own endpoint, /cloudformation_<region>/cfnresponse, at
    host.docker.internal:$MOTO_PORT; it sends only Create, and ignores a
    FAILED answer (the stack then stays CREATE_IN_PROGRESS). Here each
    invocation is queued as (function name, event) instead, and the answer
    URL is this server's loopback address: the rehearsal passes each event
    on to the function running under the Lambda emulator (answer_custom_resources).
    """
    import queue

    from moto import settings
    from moto.awslambda.models import LambdaFunction

    invocations = queue.Queue()

    def invoke(self, body, request_headers, response_headers):
        invocations.put((self.function_name, body))
        return ""

    LambdaFunction.invoke = invoke
    settings.moto_server_host = lambda: "http://127.0.0.1"
    return invocations


def record_custom_resource_answers():
    """Record each answer moto's CloudFormation gets for a custom resource."""
    from moto.cloudformation.responses import CloudFormationResponse

    answers = []
    original = CloudFormationResponse.cfnresponse.__func__

    @classmethod
    def cfnresponse(cls, *args, **kwargs):
        request = args[0]
        body = request.get_data(cache=True)
        answers.append({
            "Method": request.method,
            "ContentType": request.headers.get("Content-Type", ""),
            "Bytes": len(body),
            "Body": json.loads(body),
        })
        return original(cls, *args, **kwargs)

    CloudFormationResponse.cfnresponse = cfnresponse
    return answers


def answer_custom_resources(resources, invocations, answers, targets):
    """Pass each custom resource's request to its function's emulator.

    Returns what happened to each: the request moto made, the function
    that got it, what it answered the invocation, and the answer moto's
    CloudFormation received.
    """
    import queue
    import urllib.request

    functions = {r["PhysicalResourceId"]: r["LogicalResourceId"] for r in resources if r["ResourceType"] == "AWS::Lambda::Function"}
    custom = [r["LogicalResourceId"] for r in resources if r["ResourceType"].startswith("Custom::")]
    out = []
    for _ in custom:
        try:
            name, body = invocations.get(timeout=60)
        except queue.Empty:
            raise SystemExit(f"moto's CloudFormation invoked no function for {custom}")
        event = json.loads(body)
        function = functions.get(name, name)
        if function not in targets:
            raise SystemExit(f"{event['LogicalResourceId']} ({event['ResourceType']}) invokes {function}: "
                             f"give --invoke {function}=URL of a Lambda emulator running it")
        seen = len(answers)
        req = urllib.request.Request(targets[function].rstrip("/") + "/2015-03-31/functions/function/invocations",
                                     data=body.encode(), method="POST")
        with urllib.request.urlopen(req, timeout=120) as resp:
            result = json.loads(resp.read() or b"null")
        if isinstance(result, dict) and result.get("errorType"):
            raise SystemExit(f"{function} failed the invocation for {event['LogicalResourceId']}: {result}")
        out.append({
            "LogicalResourceId": event["LogicalResourceId"],
            "ResourceType": event["ResourceType"],
            "Function": function,
            "Request": {k: v for k, v in event.items() if k != "ResponseURL"},
            "Result": result,
            # The function answers before its invocation ends.
            "Answers": answers[seen:],
        })
    return out


def register_alias(props, account_id, region_name):
    """Create the alias in moto's Lambda; return its ARN (the alias's Ref)."""
    from moto.awslambda.models import lambda_backends

    backend = lambda_backends[account_id][region_name]
    fn = backend.get_function(props["FunctionName"])
    alias = backend.create_alias(
        name=props["Name"],
        function_name=fn.function_name,
        function_version=str(props["FunctionVersion"]),
        description="",
        routing_config=None,
    )
    return alias.arn


def bootstrap_zip():
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("bootstrap", "#!/bin/sh\n")
    return buf.getvalue()


def cmd_rehearse(args):
    """Create SET's translated stack in moto and report what it made."""
    os.environ.update({
        "AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test",
        "AWS_DEFAULT_REGION": REGION, "MOTO_ACCOUNT_ID": ACCOUNT,
        # moto's Lambda checks the function's role exists, nothing more:
        # no Docker, no invocation.
        "MOTO_LAMBDA_STUB_ECR": "TRUE",
        "MOTO_IAM_LOAD_MANAGED_POLICIES": "true",
    })
    import boto3
    from moto.server import ThreadedMotoServer

    template = load_template()
    values = chosen_values(template, args)

    targets = {}
    for kv in args.invoke or []:
        function, sep, url = kv.partition("=")
        if not sep or not url:
            raise SystemExit(f"--invoke {kv!r}: want FUNCTION=URL")
        targets[function] = url

    stand_in_types, checked = register_stand_ins()
    drop_novalue_in_lists()
    compare_as_strings()
    complete_lambda_version()
    complete_iam_role()
    invocations = bridge_custom_resources()
    answers = record_custom_resource_answers()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        host, port = server.get_host_and_port()
        endpoint = f"http://{host}:{port}"
        os.environ["MOTO_PORT"] = str(port)
        client = lambda service: boto3.client(service, endpoint_url=endpoint, region_name=REGION)

        s3 = client("s3")
        s3.create_bucket(Bucket=CODE_BUCKET)
        for name, r in template["Resources"].items():
            if r.get("Type") == "AWS::Serverless::Function":
                s3.put_object(Bucket=CODE_BUCKET, Key=f"{name}.zip", Body=bootstrap_zip())

        # The VPC mode's network exists before the stack, as in an account.
        if values.get("SubnetIds"):
            ec2 = client("ec2")
            vpc = ec2.create_vpc(CidrBlock="10.0.0.0/16")["Vpc"]["VpcId"]
            subnets = [ec2.create_subnet(VpcId=vpc, CidrBlock=f"10.0.{i}.0/24")["Subnet"]["SubnetId"] for i in range(2)]
            sg = ec2.create_security_group(GroupName="jobboard-functions", Description="functions", VpcId=vpc)["GroupId"]
            values.update({"VpcId": vpc, "SubnetIds": ",".join(subnets), "SecurityGroupIds": sg})

        translated = translate(values, template)
        cfn = client("cloudformation")
        try:
            cfn.create_stack(
                StackName=STACK,
                TemplateBody=json.dumps(translated),
                Parameters=[{"ParameterKey": k, "ParameterValue": v} for k, v in sorted(values.items())],
                Capabilities=["CAPABILITY_IAM"],
            )
        except Exception as e:
            print(f"rehearse {args.set}: create-stack failed: {e}", file=sys.stderr)
            for refusal in StandInError.raised:  # the server's thread may not have logged it yet
                print(f"rehearse {args.set}: stand-in refused: {refusal}", file=sys.stderr)
            raise SystemExit(1)
        # moto lists the resources whose condition is false too, with no
        # logical id; CloudFormation does not create them.
        resources = [r for r in cfn.list_stack_resources(StackName=STACK)["StackResourceSummaries"] if r.get("LogicalResourceId")]
        # Until its custom resources answer, a stack is not complete.
        waiting = cfn.describe_stacks(StackName=STACK)["Stacks"][0]["StackStatus"]
        custom = answer_custom_resources(resources, invocations, answers, targets)
        resources = [r for r in cfn.list_stack_resources(StackName=STACK)["StackResourceSummaries"] if r.get("LogicalResourceId")]
        stack = cfn.describe_stacks(StackName=STACK)["Stacks"][0]
        report = {
            "set": args.set,
            "status": stack["StackStatus"],
            "status_before_custom_resources": waiting,
            "resources": sorted((r["LogicalResourceId"], r["ResourceType"], r["ResourceStatus"]) for r in resources),
            "stand_ins": sorted(checked, key=lambda c: c["LogicalId"]),
            "stand_in_types": stand_in_types,
            "outputs": {o["OutputKey"]: o["OutputValue"] for o in stack.get("Outputs", [])},
            "functions": created_functions(client, resources),
            "roles": created_roles(client, resources),
            "custom_resources": custom,
        }
        json.dump(report, sys.stdout, indent=1, sort_keys=True)
        print()
        if stack["StackStatus"] != "CREATE_COMPLETE":
            raise SystemExit(1)
    finally:
        server.stop()


def created_functions(client, resources):
    """What moto's Lambda holds for each function the stack created."""
    lam = client("lambda")
    out = {}
    for r in resources:
        if r["ResourceType"] != "AWS::Lambda::Function" or not r.get("LogicalResourceId"):
            continue
        name = r["PhysicalResourceId"]
        conf = lam.get_function(FunctionName=name)["Configuration"]
        reserved = lam.get_function_concurrency(FunctionName=name).get("ReservedConcurrentExecutions")
        out[r["LogicalResourceId"]] = {
            "FunctionName": conf["FunctionName"],
            "Role": conf["Role"],
            "Environment": conf.get("Environment", {}).get("Variables", {}),
            "ReservedConcurrentExecutions": reserved,
            "SubnetIds": conf.get("VpcConfig", {}).get("SubnetIds", []),
        }
    return out


def created_roles(client, resources):
    """Each role's policy documents as moto's IAM holds them."""
    iam = client("iam")
    out = {}
    for r in resources:
        if r["ResourceType"] != "AWS::IAM::Role" or not r.get("LogicalResourceId"):
            continue
        name = r["PhysicalResourceId"]
        inline = {p: policy_json(iam.get_role_policy(RoleName=name, PolicyName=p)["PolicyDocument"])
                  for p in iam.list_role_policies(RoleName=name)["PolicyNames"]}
        managed = {}
        for p in iam.list_attached_role_policies(RoleName=name)["AttachedPolicies"]:
            arn = p["PolicyArn"]
            pol = iam.get_policy(PolicyArn=arn)["Policy"]
            doc = iam.get_policy_version(PolicyArn=arn, VersionId=pol["DefaultVersionId"])["PolicyVersion"]["Document"]
            managed[arn] = policy_json(doc)
        out[r["LogicalResourceId"]] = {"Inline": inline, "Managed": managed}
    return out


def policy_json(doc):
    """A policy document as an object (moto may hand back Python's repr)."""
    if isinstance(doc, str):
        import ast

        try:
            return json.loads(doc)
        except ValueError:
            return ast.literal_eval(doc)
    return doc


def main():
    global TEMPLATE
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--template", default=TEMPLATE, help="another template (tests of the tools themselves)")
    sub = ap.add_subparsers(dest="command", required=True)
    p = sub.add_parser("paramsets")
    p.add_argument("--raw", action="store_true", help="leave samconfig.toml's placeholders as they are")
    p.set_defaults(fn=cmd_paramsets)
    sub.add_parser("lint").set_defaults(fn=cmd_lint)
    p = sub.add_parser("versions")
    p.add_argument("file", help="a JSON list of variants")
    p.set_defaults(fn=cmd_versions)
    for name, fn in [("translate", cmd_translate), ("rehearse", cmd_rehearse)]:
        p = sub.add_parser(name)
        p.add_argument("set")
        p.add_argument("--param", action="append", metavar="KEY=VALUE", help="override one parameter of the set")
        if name == "translate":
            p.add_argument("--code", action="append", metavar="FUNCTION=KEY",
                           help="the S3 key of FUNCTION's code (a logical id), as a new build of it would have")
        if name == "rehearse":
            p.add_argument("--invoke", action="append", metavar="FUNCTION=URL",
                           help="where the Lambda emulator running FUNCTION (a logical id) listens, for custom resources")
        p.set_defaults(fn=fn)
    args = ap.parse_args()
    TEMPLATE = os.path.abspath(args.template)
    args.fn(args)


if __name__ == "__main__":
    main()
