package devstack

import (
	"encoding/json"
	"fmt"
	"os"

	"github.com/awslabs/goformation/v7/intrinsics"
)

// statusQueueResource is the logical id of the main queue in template.yaml.
const statusQueueResource = "StatusEventsQueue"

// QueueFromTemplate reads the status-events queue's visibility timeout and
// redrive maxReceiveCount from the SAM template at path, so the local queue
// behaves like the deployed one. Errors: an unreadable template, or one
// without those properties.
func QueueFromTemplate(path string) (QueueSettings, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return QueueSettings{}, fmt.Errorf("read template: %w", err)
	}
	// Intrinsics are not evaluated: only literal values matter here.
	js, err := intrinsics.ProcessYAML(data, &intrinsics.ProcessorOptions{NoProcess: true})
	if err != nil {
		return QueueSettings{}, fmt.Errorf("parse template %s: %w", path, err)
	}
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
	if err := json.Unmarshal(js, &tpl); err != nil {
		return QueueSettings{}, fmt.Errorf("parse template %s: %w", path, err)
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
