package deploy

import (
	"fmt"
	"net/mail"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
)

// Tests of what the deploy rehearsal created in moto, for every parameter
// set: the roles and their policies, and each function's settings, after
// CloudFormation (moto's) evaluated the conditions and references of the
// translated template.

// stringList flattens a policy's Action or Resource (a string or a list).
func stringList(v any) []string {
	switch x := v.(type) {
	case string:
		return []string{x}
	case []any:
		var out []string
		for _, e := range x {
			out = append(out, fmt.Sprint(e))
		}
		return out
	}
	return nil
}

// roleOf is the logical id of the role a function runs as, from the
// translation (Role: !GetAtt X.Arn).
func roleOf(t *testing.T, c *cfnTemplate, function string) string {
	t.Helper()
	role := fmt.Sprint(c.eval(t, c.resource(t, function).Properties["Role"]))
	name := resourceName(role)
	if c.Resources[name].Type != "AWS::IAM::Role" {
		t.Fatalf("%s runs as %s; want a role of this template", function, role)
	}
	return name
}

// wildcardResources are the only actions allowed on "*": X-Ray has no
// resource-level permissions, and Lambda needs its network interface
// actions on "*" (https://docs.aws.amazon.com/lambda/latest/dg/configuration-vpc.html#configuration-vpc-permissions).
//
// And ses:SendEmail: SES authorises a send against the recipient's
// identity too while the account is in the sandbox, so the worker's grant
// names none and holds the From address by condition instead
// (TestTheWorkerSendsOnlyAsMailFromIdentity). And ses:GetAccount, which
// has no resource: the account's sending quota.
var wildcardResources = map[string]bool{
	"ses:SendEmail":         true,
	"ses:GetAccount":        true,
	"xray:PutTraceSegments": true, "xray:PutTelemetryRecords": true,
	"ec2:CreateNetworkInterface": true, "ec2:DescribeNetworkInterfaces": true, "ec2:DescribeSubnets": true,
	"ec2:DeleteNetworkInterface": true, "ec2:AssignPrivateIpAddresses": true, "ec2:UnassignPrivateIpAddresses": true,
}

// vpcActions are granted only in the VPC mode.
var vpcActions = []string{"ec2:AssignPrivateIpAddresses", "ec2:CreateNetworkInterface", "ec2:DeleteNetworkInterface",
	"ec2:DescribeNetworkInterfaces", "ec2:DescribeSubnets", "ec2:UnassignPrivateIpAddresses"}

// grantsOf returns, for a role, each allowed action and the resources it
// is allowed on, over all its policies, inline and managed.
func grantsOf(t *testing.T, role rehearsedRole) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	docs := []policyDocument{}
	for _, d := range role.Inline {
		docs = append(docs, d)
	}
	for _, d := range role.Managed {
		docs = append(docs, d)
	}
	for _, d := range docs {
		for _, s := range d.Statement {
			if _, ok := s["NotAction"]; ok {
				t.Errorf("statement %v uses NotAction", s)
			}
			if s["Effect"] != "Allow" {
				continue
			}
			for _, a := range stringList(s["Action"]) {
				out[a] = append(out[a], stringList(s["Resource"])...)
			}
		}
	}
	for a := range out {
		sort.Strings(out[a])
	}
	return out
}

// The worker may send only as MailFromIdentity, through any identity SES
// checks (the recipient's too, in the sandbox): its grant is on "*" with
// a ses:FromAddress condition, as the rehearsal's IAM holds it, that
// matches MailFrom's address and no address of another domain.
func TestTheWorkerSendsOnlyAsMailFromIdentity(t *testing.T) {
	t.Parallel()
	eachSet(t, func(t *testing.T, set string) {
		r := rehearsal(t, set)
		c := translation(t, set)
		var sends []map[string]any
		for _, d := range r.Roles[roleOf(t, c, "WorkerFunction")].Inline {
			for _, st := range d.Statement {
				if slices.Contains(stringList(st["Action"]), "ses:SendEmail") {
					sends = append(sends, st)
				}
			}
		}
		if len(sends) != 1 {
			t.Fatalf("statements granting ses:SendEmail: %v; want one", sends)
		}
		st := sends[0]
		cond, _ := st["Condition"].(map[string]any)
		like, _ := cond["StringLike"].(map[string]any)
		patterns := stringList(like["ses:FromAddress"])
		if fmt.Sprint(stringList(st["Resource"])) != "[*]" || len(cond) != 1 || len(like) != 1 || len(patterns) == 0 {
			t.Fatalf("the worker's send grant %v; want ses:SendEmail on * on condition StringLike ses:FromAddress", st)
		}
		matches := func(address string) bool {
			return slices.ContainsFunc(patterns, func(p string) bool { ok, _ := path.Match(p, address); return ok })
		}
		from, err := mail.ParseAddress(c.Values["MailFrom"])
		if err != nil {
			t.Fatal(err)
		}
		identity := c.Values["MailFromIdentity"]
		for address, want := range map[string]bool{
			from.Address:                 true,
			"jobs@" + identity:           !strings.Contains(identity, "@"),
			"someone@elsewhere.example":  false,
			"jobs@" + identity + ".evil": false,
			"jobs@not" + identity:        false,
		} {
			if got := matches(address); got != want {
				t.Errorf("the worker may send as %s: %v; want %v (patterns %v)", address, got, want, patterns)
			}
		}
	})
}

// The stack's roles after the deploy: one per function, written out in the
// template (no SAM-made role with AWS's broad managed policies), each
// allowed exactly what its function does on its own resources; "*" only
// where AWS allows nothing narrower; the network interface actions only in
// the VPC mode; CodeDeploy with the limited managed role, which may invoke
// only CodeDeployHook_* functions.
func TestIAMAfterTheDeploy(t *testing.T) {
	t.Parallel()
	eachSet(t, func(t *testing.T, set string) {
		r := rehearsal(t, set)
		c := translation(t, set)
		vpc := c.condition(t, "UseVpc")
		queue := "arn:aws:sqs:us-east-1:123456789012:jobboard-status-events"
		accountQueue := "arn:aws:sqs:us-east-1:123456789012:jobboard-account-emails"
		webhookQueue := "arn:aws:sqs:us-east-1:123456789012:jobboard-webhook-events"
		feedbackQueue := "arn:aws:sqs:us-east-1:123456789012:jobboard-feedback"
		secret := c.Values["DatabaseSecretArn"]
		logs := func(fn string) string { return "log-group:jobboard-" + fn + "Logs-" }
		want := map[string]map[string][]string{
			"ApiFunction": {
				"secretsmanager:GetSecretValue": {secret, "JwtSecret", "WebhookSealingKey"},
				"sqs:SendMessage":               {queue, accountQueue, webhookQueue},
			},
			"WorkerFunction": {
				"secretsmanager:GetSecretValue": {secret},
				"sqs:ReceiveMessage":            {queue, accountQueue}, "sqs:DeleteMessage": {queue, accountQueue},
				"sqs:GetQueueAttributes":      {queue, accountQueue},
				"sqs:ChangeMessageVisibility": {queue, accountQueue},
				// A record whose send slot is far goes back as a new message.
				"sqs:SendMessage": {queue, accountQueue},
				"ses:SendEmail":   {"*"},
				// The account's MaxSendRate, which paces the sends.
				"ses:GetAccount": {"*"},
			},
			"SweeperFunction": {
				"secretsmanager:GetSecretValue": {secret},
				"sqs:SendMessage":               {queue, accountQueue, webhookQueue},
			},
			// Its queue and its secrets, nothing else: no SES, no other
			// queue. It sends to its own queue the deliveries it puts off.
			"WebhookFunction": {
				"secretsmanager:GetSecretValue": {secret, "WebhookSealingKey"},
				"sqs:ReceiveMessage":            {webhookQueue}, "sqs:DeleteMessage": {webhookQueue}, "sqs:GetQueueAttributes": {webhookQueue},
				"sqs:ChangeMessageVisibility": {webhookQueue}, "sqs:SendMessage": {webhookQueue},
			},
			// Its queue and the database, nothing else.
			"FeedbackFunction": {
				"secretsmanager:GetSecretValue": {secret},
				"sqs:ReceiveMessage":            {feedbackQueue}, "sqs:DeleteMessage": {feedbackQueue}, "sqs:GetQueueAttributes": {feedbackQueue},
			},
			"MigrateFunction": {
				"secretsmanager:GetSecretValue": {secret},
			},
			// The hook may invoke the versions its environment names.
			"PreTrafficHookFunction": {
				"lambda:InvokeFunction": {fmt.Sprint(r.Functions["PreTrafficHookFunction"].Environment["API_FUNCTION_VERSION_ARN"]),
					fmt.Sprint(r.Functions["PreTrafficHookFunction"].Environment["MIGRATE_FUNCTION_VERSION_ARN"])},
				"codedeploy:PutLifecycleEventHookExecutionStatus": {"arn:aws:codedeploy:us-east-1:123456789012:deploymentgroup:jobboard-ServerlessDeploymentApplication-"},
			},
		}

		roles := map[string]bool{"CodeDeployRole": true}
		if c.condition(t, "CreateDatabaseProxy") {
			roles["DatabaseProxyRole"] = true
		}
		for fn, actions := range want {
			role := roleOf(t, c, fn)
			roles[role] = true
			rr, ok := r.Roles[role]
			if !ok {
				t.Errorf("%s's role %s was not created", fn, role)
				continue
			}
			for arn := range rr.Managed {
				if strings.Contains(arn, ":iam::aws:policy/") {
					t.Errorf("%s's role has the AWS managed policy %s", fn, arn)
				}
			}
			got := grantsOf(t, rr)
			actions["logs:CreateLogStream"] = []string{logs(fn)}
			actions["logs:PutLogEvents"] = []string{logs(fn)}
			actions["xray:PutTraceSegments"] = []string{"*"}
			actions["xray:PutTelemetryRecords"] = []string{"*"}
			if vpc {
				for _, a := range vpcActions {
					actions[a] = []string{"*"}
				}
			}
			for a, resources := range got {
				needles, ok := actions[a]
				if !ok {
					t.Errorf("%s may %s on %v, which it does not need", fn, a, resources)
					continue
				}
				if len(resources) != len(needles) {
					t.Errorf("%s may %s on %v; want %v", fn, a, resources, needles)
					continue
				}
				for _, n := range needles {
					if !slices.ContainsFunc(resources, func(r string) bool { return r == n || (n != "*" && r != "*" && strings.Contains(r, n)) }) {
						t.Errorf("%s may %s on %v; want one that is (or holds) %s", fn, a, resources, n)
					}
				}
				for _, res := range resources {
					if res == "*" && !wildcardResources[a] {
						t.Errorf("%s may %s on every resource", fn, a)
					}
				}
			}
			for a := range actions {
				if _, ok := got[a]; !ok {
					t.Errorf("%s may not %s", fn, a)
				}
			}
		}
		var created []string
		for name := range r.Roles {
			created = append(created, name)
			if !roles[name] {
				t.Errorf("the stack made the role %s, which no test expects", name)
			}
		}
		if len(created) != len(roles) {
			t.Errorf("roles %v; want %v", created, roles)
		}

		limited := "arn:aws:iam::aws:policy/service-role/AWSCodeDeployRoleForLambdaLimited"
		cd := r.Roles["CodeDeployRole"]
		if len(cd.Managed) != 1 || len(cd.Inline) != 0 {
			t.Fatalf("CodeDeployRole policies %v; want %s alone", cd, limited)
		}
		g := grantsOf(t, cd)
		if fmt.Sprint(g["lambda:InvokeFunction"]) != "[arn:aws:lambda:*:*:function:CodeDeployHook_*]" || g["sns:Publish"] != nil {
			t.Errorf("CodeDeployRole (%v) may invoke %v and publish to %v; want only CodeDeployHook_* and no SNS", cd.Managed, g["lambda:InvokeFunction"], g["sns:Publish"])
		}
		if name := r.Functions["PreTrafficHookFunction"].FunctionName; !strings.HasPrefix(name, "CodeDeployHook_") || len(name) > 64 {
			t.Errorf("the hook function is %q; CodeDeploy may invoke only CodeDeployHook_* (at most 64 characters)", name)
		}
	})
}

// Secrets reach the functions only as ARNs, and each function may read
// exactly the secrets its environment names. The JWT key is generated by
// Secrets Manager, never written in the template; the database secret is
// the deployer's, with no default.
func TestSecretsReachFunctionsOnlyAsARNs(t *testing.T) {
	t.Parallel()
	c := translation(t, "defaults")
	jwt := c.resource(t, "JwtSecret").Properties
	gen, _ := jwt["GenerateSecretString"].(map[string]any)
	if n, _ := gen["PasswordLength"].(float64); n < 64 || gen["ExcludePunctuation"] != true || jwt["SecretString"] != nil {
		t.Errorf("JwtSecret %v; want a generated secret of at least 64 characters without punctuation, and no SecretString", jwt)
	}
	if p := c.Parameters["DatabaseSecretArn"]; p.Default != nil || !strings.Contains(p.AllowedPattern, "secretsmanager") {
		t.Errorf("parameter DatabaseSecretArn %+v; want no default and a Secrets Manager ARN pattern", p)
	}
	eachSet(t, func(t *testing.T, set string) {
		checkSecretGrants(t, rehearsal(t, set), translation(t, set))
	})
	// The webhook function's own database login replaces the API's in its
	// environment and in its grants.
	t.Run("a webhook login of its own", func(t *testing.T) {
		t.Parallel()
		const login = "arn:aws:secretsmanager:us-east-1:123456789012:secret:jobboard-webhooks-GhIjKl"
		param := "WebhookDatabaseSecretArn=" + login
		r := rehearsal(t, "defaults", param)
		checkSecretGrants(t, r, translation(t, "defaults", param))
		env := r.Functions["WebhookFunction"].Environment
		if _, api := env["DATABASE_SECRET_ARN"]; api || env["WEBHOOK_DATABASE_SECRET_ARN"] != login {
			t.Errorf("WebhookFunction's database secrets %v, %v; want its own login alone", env["DATABASE_SECRET_ARN"], env["WEBHOOK_DATABASE_SECRET_ARN"])
		}
	})
}

// checkSecretGrants: each function of the rehearsal gets its secrets only
// as ARNs, and may read exactly the secrets its environment names.
func checkSecretGrants(t *testing.T, r *rehearsalReport, c *cfnTemplate) {
	t.Helper()
	for fn, f := range r.Functions {
		var secrets []string
		for k, v := range f.Environment {
			s := fmt.Sprint(v)
			if strings.HasSuffix(k, "_SECRET_ARN") {
				secrets = append(secrets, s)
				continue
			}
			for _, bad := range []string{"SECRET", "PASSWORD", "TOKEN", "DATABASE_URL", "PRIVATE_KEY"} {
				if strings.Contains(k, bad) {
					t.Errorf("%s: %s looks like a secret value; pass a *_SECRET_ARN instead", fn, k)
				}
			}
			if strings.Contains(s, "://") && strings.Contains(s, "@") {
				t.Errorf("%s: %s = %q carries credentials in a URL", fn, k, s)
			}
		}
		sort.Strings(secrets)
		got := grantsOf(t, r.Roles[roleOf(t, c, fn)])["secretsmanager:GetSecretValue"]
		if !slices.Equal(got, secrets) {
			t.Errorf("%s may read the secrets %v; its environment names %v", fn, got, secrets)
		}
	}
}

// What each function runs with after the deploy: no reserved concurrency
// unless the set asks for it (a new account's quota refuses any); the
// proxy-safe query mode and a verified TLS connection; the VPC when the
// set has one; the hook pointed at this deploy's versions.
func TestDeployedFunctionSettings(t *testing.T) {
	t.Parallel()
	eachSet(t, func(t *testing.T, set string) {
		r := rehearsal(t, set)
		c := translation(t, set)
		reserved := map[string]string{}
		if v := c.Values["ApiReservedConcurrency"]; v != "0" {
			reserved["ApiFunction"] = v
		}
		if v := c.Values["SweeperReservedConcurrency"]; v != "0" {
			reserved["SweeperFunction"] = v
		}
		proxy := c.condition(t, "UseDatabaseProxy")
		wantCert := "/var/task/rds-global-bundle.pem"
		if proxy {
			wantCert = "system"
		}
		if len(r.Functions) != 7 {
			t.Errorf("functions %v; want the API, the worker, the sweeper, the webhook and the feedback functions, the migration and the hook", len(r.Functions))
		}
		for fn, f := range r.Functions {
			got := ""
			if f.ReservedConcurrentExecutions != nil {
				got = fmt.Sprint(*f.ReservedConcurrentExecutions)
			}
			if got != reserved[fn] {
				t.Errorf("%s reserved concurrency %q; want %q", fn, got, reserved[fn])
			}
			mode, hasMode := f.Environment["DATABASE_QUERY_EXEC_MODE"]
			if hasMode != proxy || (proxy && mode != "exec") {
				t.Errorf("%s DATABASE_QUERY_EXEC_MODE %v (set: %v); want exec behind the proxy, unset without", fn, mode, hasMode)
			}
			if cert := f.Environment["DATABASE_SSLROOTCERT"]; cert != wantCert {
				t.Errorf("%s DATABASE_SSLROOTCERT %v; want %s (verify-full)", fn, cert, wantCert)
			}
			// The hook never connects to the database: it runs outside
			// the VPC, its calls to Lambda and CodeDeploy needing nothing
			// of it.
			if inVpc := c.condition(t, "UseVpc") && fn != "PreTrafficHookFunction"; (len(f.SubnetIDs) > 0) != inVpc {
				t.Errorf("%s subnets %v; want them: %v", fn, f.SubnetIDs, inVpc)
			}
		}
		hook := r.Functions["PreTrafficHookFunction"].Environment
		for k, fn := range map[string]string{"API_FUNCTION_VERSION_ARN": "ApiFunction", "MIGRATE_FUNCTION_VERSION_ARN": "MigrateFunction"} {
			arn := fmt.Sprint(hook[k])
			if !strings.Contains(arn, ":function:"+r.Functions[fn].FunctionName+":") || !versionSuffix.MatchString(arn) {
				t.Errorf("hook %s = %s; want a version of %s", k, arn, r.Functions[fn].FunctionName)
			}
		}
		if got := fmt.Sprint(r.Functions["ApiFunction"].Environment["CORS_ALLOWED_ORIGINS"]); got != c.Values["CorsAllowedOrigins"] {
			t.Errorf("ApiFunction CORS_ALLOWED_ORIGINS %q; want %q", got, c.Values["CorsAllowedOrigins"])
		}
	})
}

var versionSuffix = regexp.MustCompile(`:[0-9]+$`)

// Both queues refuse requests that do not come over TLS.
func TestQueuesRefuseInsecureTransport(t *testing.T) {
	t.Parallel()
	c := translation(t, "defaults")
	var covered []string
	for _, name := range c.ofType("AWS::SQS::QueuePolicy") {
		p := c.eval(t, c.resource(t, name).Properties).(map[string]any)
		doc, _ := p["PolicyDocument"].(map[string]any)
		for _, s := range doc["Statement"].([]any) {
			st := s.(map[string]any)
			cond := fmt.Sprint(st["Condition"])
			if st["Effect"] == "Deny" && st["Principal"] == "*" && fmt.Sprint(st["Action"]) == "sqs:*" &&
				cond == "map[Bool:map[aws:SecureTransport:false]]" {
				for _, q := range stringList(p["Queues"]) {
					covered = append(covered, resourceName(q))
				}
			}
		}
	}
	sort.Strings(covered)
	if want := c.ofType("AWS::SQS::Queue"); !slices.Equal(covered, want) {
		t.Errorf("queues that refuse plain HTTP: %v; want %v", covered, want)
	}
}

// A sweep that fails or is throttled is not retried by Lambda (the next
// one comes within a minute), and an event never waits longer than that.
func TestSweeperDropsFailedAsyncInvocations(t *testing.T) {
	t.Parallel()
	c := translation(t, "defaults")
	if configs := c.ofType("AWS::Lambda::EventInvokeConfig"); !slices.Contains(configs, "SweeperFunctionEventInvokeConfig") {
		t.Fatalf("EventInvokeConfig resources %v; want the sweeper's", configs)
	}
	p := c.eval(t, c.resource(t, "SweeperFunctionEventInvokeConfig").Properties).(map[string]any)
	if p["FunctionName"] != refPlaceholder("SweeperFunction") || p["Qualifier"] != "live" ||
		p["MaximumRetryAttempts"] != 0.0 || p["MaximumEventAgeInSeconds"] != 60.0 {
		t.Errorf("EventInvokeConfig %v; want the sweeper's alias, no retries, at most 60 s", p)
	}
}

// The rehearsal's stand-ins check what they stand in for against the
// type's schema (cfn-lint's copy of CloudFormation's): a property the type
// does not have, a required one missing, both of an either-or pair, an
// attribute it does not have, each fails the create.
func TestRehearsalStandInsCheckTheSchemas(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile(templatePath)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name, old, new, want string
	}{
		{"unknown property",
			"      Description: HMAC key that signs the API's JWTs (generated; never in the template).\n",
			"      Description: HMAC key that signs the API's JWTs (generated; never in the template).\n      Rotation: weekly\n",
			"JwtSecret (AWS::SecretsManager::Secret): missing required [], unknown ['Rotation']"},
		{"missing required property",
			"      Queues:\n        - !Ref StatusEventsQueue\n        - !Ref StatusEventsDLQ\n        - !Ref AccountEmailsQueue\n        - !Ref AccountEmailsDLQ\n",
			"",
			"StatusEventsQueuesPolicy (AWS::SQS::QueuePolicy): missing required ['Queues']"},
		{"both of an either-or pair",
			"      AlarmDescription: More than 5 % of the requests to the ApiFunction version being deployed answered 5xx; CodeDeploy rolls back.\n",
			"      AlarmDescription: More than 5 % of the requests to the ApiFunction version being deployed answered 5xx; CodeDeploy rolls back.\n      MetricName: ServerErrors\n",
			"ApiNewVersionServerErrorsAlarm (AWS::CloudWatch::Alarm): want exactly one of ['Metrics', 'MetricName']"},
		{"unknown attribute",
			"Outputs:\n",
			"Outputs:\n  JwtSecretName:\n    Value: !GetAtt JwtSecret.SecretName\n",
			"does not support attribute type SecretName in Fn::GetAtt"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			mutated := strings.Replace(string(data), tt.old, tt.new, 1)
			if mutated == string(data) {
				t.Fatalf("%q not found in template.yaml; update this test", tt.old)
			}
			path := filepath.Join(t.TempDir(), "template.yaml")
			if err := os.WriteFile(path, []byte(mutated), 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := runSamtool("--template", path, "rehearse", "defaults")
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("rehearsal: %v\nwant a failure saying %q", err, tt.want)
			}
		})
	}
}
