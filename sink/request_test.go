package sink

import "testing"

func TestInsertURI(t *testing.T) {
	tests := []struct {
		target, token, want string
	}{
		{"`analytics`.`events`", "", "/?query=INSERT%20INTO%20%60analytics%60.%60events%60%20FORMAT%20JSONEachRow" + pinnedSettings},
		{"`default`.`events`", "", "/?query=INSERT%20INTO%20%60default%60.%60events%60%20FORMAT%20JSONEachRow" + pinnedSettings},
		{"`a``b`.`t`", "", "/?query=INSERT%20INTO%20%60a%60%60b%60.%60t%60%20FORMAT%20JSONEachRow" + pinnedSettings},
		{Target("", `x\y`), "", "/?query=INSERT%20INTO%20%60default%60.%60x%5C%5Cy%60%20FORMAT%20JSONEachRow" + pinnedSettings},
		{"`analytics`.`events`", "ch:events/3/17-42",
			"/?query=INSERT%20INTO%20%60analytics%60.%60events%60%20FORMAT%20JSONEachRow" + pinnedSettings + "&insert_deduplication_token=ch%3Aevents%2F3%2F17-42"},
		{"`d`.`t`", "a b&c=d~_.", "/?query=INSERT%20INTO%20%60d%60.%60t%60%20FORMAT%20JSONEachRow" + pinnedSettings + "&insert_deduplication_token=a%20b%26c%3Dd~_."},
	}
	for _, tt := range tests {
		if got := InsertURI(tt.target, tt.token); got != tt.want {
			t.Errorf("InsertURI(%q, %q):\n got %s\nwant %s", tt.target, tt.token, got, tt.want)
		}
	}
}

func TestSettingQuery(t *testing.T) {
	tests := []struct{ name, want string }{
		{TokenSetting, "SELECT count() FROM system.settings WHERE name = 'insert_deduplication_token'"},
		{`a'b\c`, `SELECT count() FROM system.settings WHERE name = 'a\'b\\c'`},
	}
	for _, tt := range tests {
		if got := settingQuery(tt.name); got != tt.want {
			t.Errorf("settingQuery(%q): got %s, want %s", tt.name, got, tt.want)
		}
	}
}
