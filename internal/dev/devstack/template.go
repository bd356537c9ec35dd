package devstack

import (
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/awslabs/goformation/v7/intrinsics"
)

// statusQueueResource is the logical id of the main queue in template.yaml.
const statusQueueResource = "StatusEventsQueue"

// QueueFromTemplate reads the status-events queue's visibility timeout and
// redrive maxReceiveCount from the SAM template at path, so the local queue
// behaves like the deployed one. Errors: an unreadable template, or one
// without those properties.
func QueueFromTemplate(path string) (QueueSettings, error) {
	var tpl struct {
		Resources map[string]struct {
			Properties struct {
				VisibilityTimeout int
				RedrivePolicy     struct {
					MaxReceiveCount int `json:"maxReceiveCount"`
				}
			}
		}
	}
	if err := readTemplate(path, &tpl); err != nil {
		return QueueSettings{}, err
	}
	p := tpl.Resources[statusQueueResource].Properties
	if p.VisibilityTimeout <= 0 || p.RedrivePolicy.MaxReceiveCount <= 0 {
		return QueueSettings{}, fmt.Errorf("template %s: %s needs a literal VisibilityTimeout and RedrivePolicy.maxReceiveCount",
			path, statusQueueResource)
	}
	return QueueSettings{
		Name:              "status-events",
		VisibilityTimeout: p.VisibilityTimeout,
		MaxReceiveCount:   p.RedrivePolicy.MaxReceiveCount,
	}, nil
}

// readTemplate decodes the SAM template at path, as JSON, into v.
// Intrinsic functions are not evaluated: only literal values matter here.
func readTemplate(path string, v any) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("read template: %w", err)
	}
	js, err := intrinsics.ProcessYAML(data, &intrinsics.ProcessorOptions{NoProcess: true})
	if err != nil {
		return fmt.Errorf("parse template %s: %w", path, err)
	}
	if err := json.Unmarshal(js, v); err != nil {
		return fmt.Errorf("parse template %s: %w", path, err)
	}
	return nil
}

// FunctionSettings are what the Lambda runtime emulator needs to know about
// a function, as template.yaml declares it.
type FunctionSettings struct {
	// MemorySize is in MB; Timeout in seconds.
	MemorySize int
	Timeout    int
}

// Lambda's defaults when neither the function nor Globals say.
const (
	defaultMemorySize = 128
	defaultTimeout    = 3
)

// FunctionFromTemplate reads the MemorySize and Timeout of the function
// logicalID from the SAM template at path: the function's own, else
// Globals', else Lambda's defaults. Errors: an unreadable template, or no
// AWS::Serverless::Function of that name.
func FunctionFromTemplate(path, logicalID string) (FunctionSettings, error) {
	// any: a value may be an intrinsic function (!Ref) rather than a
	// number; only literal numbers count.
	type settings struct {
		MemorySize any
		Timeout    any
	}
	var tpl struct {
		Globals struct {
			Function settings
		}
		Resources map[string]struct {
			Type       string
			Properties settings
		}
	}
	if err := readTemplate(path, &tpl); err != nil {
		return FunctionSettings{}, err
	}
	r, ok := tpl.Resources[logicalID]
	if !ok || r.Type != "AWS::Serverless::Function" {
		var names []string
		for name, r := range tpl.Resources {
			if r.Type == "AWS::Serverless::Function" {
				names = append(names, name)
			}
		}
		slices.Sort(names)
		return FunctionSettings{}, fmt.Errorf("template %s has no function %q (it has %s)", path, logicalID, strings.Join(names, ", "))
	}
	f := FunctionSettings{MemorySize: defaultMemorySize, Timeout: defaultTimeout}
	for _, s := range []settings{tpl.Globals.Function, r.Properties} {
		if n, ok := s.MemorySize.(float64); ok && n > 0 {
			f.MemorySize = int(n)
		}
		if n, ok := s.Timeout.(float64); ok && n > 0 {
			f.Timeout = int(n)
		}
	}
	return f, nil
}
