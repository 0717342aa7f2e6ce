package plugin

import (
	"fmt"
	"os/exec"
)

func fmtSscan(s string, v *int) (int, error) { return fmt.Sscan(s, v) }

func osexecCombined(bin string) (string, error) {
	out, err := exec.Command(bin).CombinedOutput()
	return string(out), err
}

func errString(err error) string {
	if err == nil {
		return "no error"
	}
	return err.Error()
}
