//go:build yidudeps

package tools

import (
	_ "github.com/RoaringBitmap/roaring/v2"
	_ "github.com/alicebob/miniredis/v2"
	_ "github.com/go-chi/chi/v5"
	_ "github.com/go-sql-driver/mysql"
	_ "github.com/pressly/goose/v3"
	_ "github.com/prometheus/client_golang/prometheus"
	_ "github.com/redis/go-redis/v9"
	_ "github.com/silenceper/wechat/v2/util"
	_ "github.com/silenceper/wechat/v2/work"
	_ "github.com/silenceper/wechat/v2/work/addresslist"
	_ "github.com/silenceper/wechat/v2/work/message"
	_ "github.com/silenceper/wechat/v2/cache"
	_ "github.com/twmb/franz-go/pkg/kgo"
	_ "github.com/twmb/franz-go/pkg/kfake"
	_ "github.com/twmb/franz-go/pkg/kadm"
	_ "golang.org/x/time/rate"
	_ "golang.org/x/sync/singleflight"
	_ "go.yaml.in/yaml/v3"
	_ "github.com/chromedp/chromedp"
	_ "github.com/dolthub/go-mysql-server/server"
	_ "github.com/dolthub/go-mysql-server/memory"
)
