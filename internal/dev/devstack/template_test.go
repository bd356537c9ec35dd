package devstack

import (
	"os"
	"strings"
	"testing"
)

// The local queue copies the template's settings, whatever they are now.
func TestQueueFromTemplate(t *testing.T) {
	q, err := QueueFromTemplate("../../../template.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if q.VisibilityTimeout < 30 || q.MaxReceiveCount < 5 {
		t.Errorf("QueueFromTemplate = %+v, want the template's visibility timeout (≥ 30) and maxReceiveCount (≥ 5)", q)
	}
	if _, err := QueueFromTemplate("testdata/missing.yaml"); err == nil {
		t.Error("QueueFromTemplate(missing file) = nil error")
	}
}

// The emulator gets each function's memory and timeout as template.yaml
// declares them: the function's own, else Globals'.
func TestFunctionFromTemplate(t *testing.T) {
	dir := t.TempDir()
	path := dir + "/template.yaml"
	tpl := `Globals:
  Function:
    MemorySize: 256
    Timeout: 5
Resources:
  ApiFunction:
    Type: AWS::Serverless::Function
    Properties:
      Timeout: 10
  WorkerFunction:
    Type: AWS::Serverless::Function
    Properties:
      MemorySize: 512
      Timeout: !Ref WorkerTimeout
  Queue:
    Type: AWS::SQS::Queue
`
	if err := os.WriteFile(path, []byte(tpl), 0o600); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]FunctionSettings{
		"ApiFunction":    {MemorySize: 256, Timeout: 10},
		"WorkerFunction": {MemorySize: 512, Timeout: 5}, // a !Ref is not a literal: Globals' applies
	} {
		got, err := FunctionFromTemplate(path, name)
		if err != nil || got != want {
			t.Errorf("FunctionFromTemplate(%s) = %+v, %v; want %+v", name, got, err, want)
		}
	}
	if _, err := FunctionFromTemplate(path, "Queue"); err == nil || !strings.Contains(err.Error(), "ApiFunction, WorkerFunction") {
		t.Errorf("FunctionFromTemplate(Queue) = %v; want an error listing the functions", err)
	}

	// And the real template's, whatever they are now.
	for _, name := range []string{"ApiFunction", "WorkerFunction", "SweeperFunction"} {
		f, err := FunctionFromTemplate("../../../template.yaml", name)
		if err != nil || f.MemorySize < 128 || f.Timeout < 1 {
			t.Errorf("FunctionFromTemplate(template.yaml, %s) = %+v, %v", name, f, err)
		}
	}
}
