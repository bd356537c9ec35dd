package deploy

import (
	"fmt"
	"strings"
	"testing"
)

// A message on the feedback topic suppresses an address: only SES, for
// this stack's configuration set, may publish there. The translated
// topic policy is evaluated as IAM evaluates a resource policy for
// sns:Publish: an explicit Deny wins over any Allow, the publisher's own
// identity policy included; a negated condition on a key the request lacks
// matches (https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_elements_condition_operators.html).

// publishRequest is one sns:Publish to the topic: who, and the context
// keys it carries (lower-case names).
type publishRequest struct {
	name      string
	principal map[string]string // "Service" or "AWS" → the principal
	keys      map[string]string
}

// topicDecision is what the topic's policy says of a request: "deny"
// (explicit), "allow", or "" (neither: only an identity policy of the
// same account could allow it).
func topicDecision(t *testing.T, statements []any, r publishRequest) string {
	t.Helper()
	decision := ""
	for _, s := range statements {
		st, _ := s.(map[string]any)
		if !actionMatches(stringList(st["Action"]), "sns:Publish") || !principalMatches(st["Principal"], r.principal) || !conditionsMatch(t, st["Condition"], r.keys) {
			continue
		}
		switch st["Effect"] {
		case "Deny":
			return "deny"
		case "Allow":
			decision = "allow"
		}
	}
	return decision
}

func actionMatches(list []string, v string) bool {
	for _, e := range list {
		if e == v || e == "*" || e == "sns:*" {
			return true
		}
	}
	return false
}

func principalMatches(p any, who map[string]string) bool {
	if p == "*" {
		return true
	}
	m, _ := p.(map[string]any)
	for kind, v := range m {
		for _, want := range stringList(v) {
			if want == "*" || who[kind] == want {
				return true
			}
		}
	}
	return false
}

func conditionsMatch(t *testing.T, c any, keys map[string]string) bool {
	t.Helper()
	conds, _ := c.(map[string]any)
	for op, byKey := range conds {
		for key, want := range byKey.(map[string]any) {
			got, present := keys[strings.ToLower(key)]
			values := stringList(want)
			equal := false
			for _, v := range values {
				equal = equal || (present && got == v)
			}
			var ok bool
			switch op {
			case "StringEquals", "ArnEquals":
				ok = equal
			case "StringNotEquals", "ArnNotEquals":
				ok = !equal
			default:
				t.Fatalf("condition operator %s: not known to this test", op)
			}
			if !ok {
				return false
			}
		}
	}
	return true
}

func TestOnlyThisStacksConfigurationSetPublishesFeedback(t *testing.T) {
	t.Parallel()
	const setARN = "arn:${AWS::Partition}:ses:${AWS::Region}:${AWS::AccountId}:configuration-set/"
	ses := map[string]string{"Service": "ses.amazonaws.com"}
	for _, tt := range []struct {
		params  []string
		ourSet  string
		another string
	}{
		{nil, "${AWS::StackName}-emails", "marketing"},
		{[]string{"MailConfigurationSet=dedicated-ips"}, "dedicated-ips", "${AWS::StackName}-emails"},
	} {
		t.Run(fmt.Sprint(tt.params), func(t *testing.T) {
			t.Parallel()
			c := translation(t, "defaults", tt.params...)
			props := c.eval(t, c.resource(t, "FeedbackTopicPolicy").Properties).(map[string]any)
			doc, _ := props["PolicyDocument"].(map[string]any)
			statements, _ := doc["Statement"].([]any)
			for _, r := range []struct {
				req  publishRequest
				want string
			}{
				{publishRequest{"SES for this stack's set", ses, map[string]string{"aws:sourcearn": setARN + tt.ourSet, "aws:sourceaccount": "${Ref:AWS::AccountId}"}}, "allow"},
				{publishRequest{"SES for another set of the account", ses, map[string]string{"aws:sourcearn": setARN + tt.another, "aws:sourceaccount": "${Ref:AWS::AccountId}"}}, "deny"},
				{publishRequest{"SES without a source", ses, nil}, "deny"},
				{publishRequest{"a role of the account", map[string]string{"AWS": "arn:aws:iam::123456789012:role/anything"}, nil}, "deny"},
				{publishRequest{"another account", map[string]string{"AWS": "arn:aws:iam::210987654321:root"}, map[string]string{"aws:sourceaccount": "210987654321"}}, "deny"},
			} {
				if got := topicDecision(t, statements, r.req); got != r.want {
					t.Errorf("%s: the topic policy says %q; want %q\n%v", r.req.name, got, r.want, statements)
				}
			}
		})
	}
}
