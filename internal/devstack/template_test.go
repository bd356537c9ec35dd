package devstack

import "testing"

// The local queue copies the template's settings, whatever they are now.
func TestQueueFromTemplate(t *testing.T) {
	q, err := QueueFromTemplate("../../template.yaml")
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
