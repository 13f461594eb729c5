package yidu

// The page's words for what yidu records of a reader (docs: zh-CN.md's
// glossary): one set, used by the dashboard (its zh-CN catalogue's
// signal.* and state.* keys are checked against these), the API's labels,
// the CSV, the 告知确认书 and 我的记录, so a press of the card's button is
// never called what an acknowledgement on the page is (issue 49).

// Word is s in the page's words: 已点击「我已阅读」, 已打开, 进入应用,
// 已读完, 已确认知悉; "" for an invalid signal.
func (s Signal) Word() string {
	switch s {
	case SignalButton:
		return "已点击「我已阅读」"
	case SignalLink:
		return "已打开"
	case SignalEnterAgent:
		return "进入应用"
	case SignalReadToEnd:
		return "已读完"
	case SignalAcknowledged:
		return "已确认知悉"
	}
	return ""
}

// ReadState is where a recipient stands with a notice read on its page
// (read_rule acknowledged), furthest first: the four states the people
// filter, the CSV, remind and the PDF use.
type ReadState string

// The read states.
const (
	ReadStateUnopened     ReadState = "unopened"     // 未打开
	ReadStateOpened       ReadState = "opened"       // 已打开未读完
	ReadStateReadToEnd    ReadState = "read_to_end"  // 已读完未确认
	ReadStateAcknowledged ReadState = "acknowledged" // 已确认知悉
)

// ReadStates lists the read states in the order a reader moves through
// them.
func ReadStates() []ReadState {
	return []ReadState{ReadStateUnopened, ReadStateOpened, ReadStateReadToEnd, ReadStateAcknowledged}
}

// Word is st in the page's words; "" for an unknown state.
func (st ReadState) Word() string {
	switch st {
	case ReadStateUnopened:
		return "未打开"
	case ReadStateOpened:
		return "已打开未读完"
	case ReadStateReadToEnd:
		return "已读完未确认"
	case ReadStateAcknowledged:
		return "已确认知悉"
	}
	return ""
}

// StateOf is the read state of a reader who gave the signals has.
func StateOf(has func(Signal) bool) ReadState {
	switch {
	case has(SignalAcknowledged):
		return ReadStateAcknowledged
	case has(SignalReadToEnd):
		return ReadStateReadToEnd
	case has(SignalLink):
		return ReadStateOpened
	}
	return ReadStateUnopened
}
